/* attn classify train|eval|predict|explain: seed 002's self-attention sentiment classifier on
 * IMDB reviews (aclImdb layout; the shipped mini set by default). */
#include "classify.h"
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const attention_names[] = {"softmax", "linear", "conv", "additive", NULL};

/* --recipe: options put before the command line's, which override them (docs/results.md measures
 * "best" on IMDB: chosen on the validation split) */
#define RECIPE_BEST "--mask-padding --ngrams 4194304 --epochs 1"
static const char *const recipe_names[] = {"seed", "best", NULL};
static const char *const recipe_options[] = {"", RECIPE_BEST}; /* of recipe_names[i] */
_Static_assert(sizeof recipe_options / sizeof *recipe_options + 1 == sizeof recipe_names / sizeof *recipe_names,
               "a recipe's options for each name");
static const char *const action_names[] = {"train", "eval", "predict", "explain", NULL};
enum {
    TRAIN,
    EVAL,
    PREDICT,
    EXPLAIN
};

#define M(kind, field) CLI_OPT_AT(classify_options, kind, model.field)
static const cli_option options[] = {
    {"--data", "DIR", CLI_OPT_AT(classify_options, CLI_IN_DIR, data), 0, 0, NULL, NULL,
     "aclImdb root with train/ and test/ (default the shipped aclImdb_mini: $ATTN_DATA_DIR, or beside the "
     "program, or its installed share/attn)",
     "train eval"},
    {"--validate", NULL, CLI_OPT_AT(classify_options, CLI_FLAG, validate), 0, 0, NULL, NULL,
     "hold out the last 10% of each label's training reviews (by id): train on the rest and score those, not "
     "the test set (to choose settings without seeing it)",
     "train"},
    {"--recipe", NULL, CLI_OPT_AT(classify_options, CLI_CHOICE, recipe), 0, 0, recipe_names, "seed",
     "a preset of options, which those given override: seed (the seed's settings) or best (\"" RECIPE_BEST "\")",
     "train"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "model (train; the others read it from the checkpoint):"},
    {"--attention", NULL, CLI_OPT_AT(classify_options, CLI_CHOICE, attention), 0, 0, attention_names, "softmax",
     "the attention layer: the seed's multi-head softmax, or one of seed 002's variants", "train"},
    {"--blocks", "N", M(CLI_INT, num_blocks), 0, 64, NULL, "0", "N Transformer blocks instead of one attention layer",
     "train"},
    {"--pre-ln", NULL, M(CLI_FLAG, norm_first), 0, 0, NULL, NULL, "blocks are pre-LN (default post-LN, as the seed)",
     "train"},
    {"--sinusoidal", NULL, M(CLI_FLAG, sinusoidal), 0, 0, NULL, NULL,
     "sinusoidal positions instead of the learned table", "train"},
    {"--mask-padding", NULL, M(CLI_FLAG, mask_padding), 0, 0, NULL, NULL,
     "mask padding keys and pool over real tokens (the seed does not)", "train"},
    {"--no-pack", NULL, CLI_OPT_AT(classify_options, CLI_FLAG, no_pack), 0, 0, NULL, NULL,
     "with --mask-padding (and --blocks or the softmax attention), each batch padded to its longest review; by "
     "default its reviews are packed end to end, no padding computed (the same model)",
     "train eval"},
    {"--embed-dim", "N", M(CLI_INT64, embed_dim), 1, 4096, NULL, "128", "embedding width E", "train"},
    {"--heads", "N", M(CLI_INT64, num_heads), 1, 256, NULL, "4", "attention heads (must divide E)", "train"},
    {"--hidden", "N", M(CLI_INT64, hidden_dim), 1, 65536, NULL, "256", "hidden width of the classifier head", "train"},
    {"--ngrams", "N", M(CLI_INT64, ngram_buckets), 0, 1 << 26, NULL, "0",
     "a linear bag of the review's words and bigrams (hashed into N buckets) beside the attention, added to the "
     "logits (fastText's features; 0: none, as the seed)",
     "train"},
    {"--dropout", "X", M(CLI_FLOAT, dropout), 0, 0.99, NULL, "0.5", "dropout of the classifier head", "train"},
    {"--additive-hidden", "N", M(CLI_INT64, additive_hidden), 1, 4096, NULL, NULL,
     "additive attention's hidden width (default E)", "train"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "explain:"},
    {"--out", "FILE", CLI_OPT_AT(classify_options, CLI_PICTURE, out), 0, 0, NULL, "attention.png",
     "the heatmap (.png, .svg or .pdf)", "explain"},
    {"--seed-style", NULL, CLI_OPT_AT(classify_options, CLI_FLAG, seed_style_explain), 0, 0, NULL, NULL,
     "the weights of the embeddings alone, without positions: seed 002's visualize_attention", "explain"},
    CLI_TRAIN_OPTIONS(classify_options, "5", "32", "1e-3", "512", "classifier.safetensors"),
};
#undef M

const cli_spec classify_spec = {
    .cmd = "classify",
    .synopsis = "train|eval|predict|explain [options] [TEXT ...]",
    .about = "Seed 002's classifier: Embedding + positions + self-attention + mean pool + MLP,\n"
             "trained with Adam on IMDB reviews (label = folder pos/neg).",
    .actions = "  train             build the vocabulary, train, print the test accuracy\n"
               "  eval              test accuracy of a saved model\n"
               "  predict [TEXT]    label and probability per text (arguments, or lines of stdin)\n"
               "  explain TEXT      the attention heatmap of a text: the weights the model uses, mean\n"
               "                    over the heads (--seed-style: seed 002's visualize_attention)\n",
    CLI_OPTIONS(options),
};

char *classify_vocab_path(const char *checkpoint)
{
    return cli_checkpoint_sibling(checkpoint, ".vocab");
}

/* The files the action reads and writes, and the model's shape, checked before any work.
 * heads_given: --heads was given (not its default). */
static int validate(const classify_options *o, int action, int n_texts, bool heads_given)
{
    const attn_classifier_config *m = &o->model;
    if ((action == TRAIN || action == EVAL) && n_texts)
        return cli_fail(CLI_ERR_USAGE, "classify", "%s takes no TEXT arguments", action_names[action]);
    if (action == EXPLAIN && n_texts != 1)
        return cli_fail(CLI_ERR_USAGE, "classify", "explain takes one TEXT (quote it), got %d", n_texts);
    if (cli_check_paths(&classify_spec, o, action_names[action]) != CLI_OK) return CLI_ERR_USAGE;
    if (action == TRAIN) {
        bool heads =
            m->num_blocks > 0 || m->attention == ATTN_CLASSIFIER_SOFTMAX || m->attention == ATTN_CLASSIFIER_CONV;
        if (heads_given && !heads)
            return cli_fail(CLI_ERR_USAGE, "classify",
                            "--heads: %s attention without --blocks has no heads; it would "
                            "be stored and ignored",
                            attention_names[m->attention]);
        if (m->additive_hidden > 0 && m->attention != ATTN_CLASSIFIER_ADDITIVE)
            return cli_fail(CLI_ERR_USAGE, "classify", "--additive-hidden applies with --attention additive only");
        if (o->no_pack && !(m->mask_padding && (m->attention == ATTN_CLASSIFIER_SOFTMAX || m->num_blocks > 0)))
            return cli_fail(CLI_ERR_USAGE, "classify",
                            "--no-pack applies with --mask-padding, and --blocks or the "
                            "softmax attention (the batches of the others are padded)");
        if (m->norm_first && m->num_blocks == 0)
            return cli_fail(CLI_ERR_USAGE, "classify", "--pre-ln applies with --blocks N (N >= 1) only");
        if (m->sinusoidal && m->embed_dim % 2 != 0)
            return cli_fail(CLI_ERR_USAGE, "classify", "--sinusoidal needs an even --embed-dim, got %lld",
                            (long long)m->embed_dim);
        if (heads && m->embed_dim % m->num_heads != 0)
            return cli_fail(CLI_ERR_USAGE, "classify", "--heads %lld must divide --embed-dim %lld",
                            (long long)m->num_heads, (long long)m->embed_dim);
    }
    return CLI_OK;
}

/* Options after the action; free arguments (texts) are collected in texts. */
static int parse(int argc, char **argv, classify_options *o, int *action, const char ***texts, int *n_texts)
{
    memset(o, 0, sizeof *o);
    o->model = attn_classifier_defaults(0);
    *texts = calloc((size_t)argc, sizeof **texts);
    if (!*texts) return cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    for (*action = 0; action_names[*action] && strcmp(argv[1], action_names[*action]); ++*action) {}
    if (!action_names[*action])
        return cli_fail(CLI_ERR_USAGE, "classify", "unknown action \"%s\"; expected train, eval, predict or explain",
                        argv[1]);
    int code = cli_parse(&classify_spec, o, argc, argv, 2, *texts, n_texts);
    if (code != CLI_OK) return code;
    if (!o->data) o->data = cli_default_data("aclImdb_mini");
    o->model.attention = (attn_classifier_attention)o->attention;
    o->model.max_len = o->train.max_len;
    if ((code = validate(o, *action, *n_texts, cli_given(&classify_spec, argc, argv, 2, "--heads"))) != CLI_OK)
        return code;
    if (o->train.threads > 0) cli_set_threads((int)o->train.threads);
    cli_set_matmul_precision((attn_precision)o->train.matmul_precision);
    return CLI_OK;
}

/* ---- data ---- */

static const char *const specials[2] = {"<unk>", "<pad>"};

static attn_status encode_split(classify_split *out, const attn_labeled_texts *t, const attn_vocab *v)
{
    memset(out, 0, sizeof *out);
    out->count = t->count;
    out->labels = malloc((size_t)(t->count ? t->count : 1) * sizeof *out->labels);
    if (!out->labels) return ATTN_ERR_NOMEM;
    memcpy(out->labels, t->labels, (size_t)t->count * sizeof *out->labels);
    return attn_encode_texts(&out->ids, v, ATTN_TOKENIZER_BASIC_ENGLISH, (const char *const *)t->texts, t->count);
}

static void free_split(classify_split *s)
{
    attn_id_seqs_free(&s->ids);
    free(s->labels);
}

/* The vocabulary of the training reviews (torchtext's build_vocab_from_iterator order). */
static attn_vocab *build_vocab(const attn_labeled_texts *train)
{
    attn_counter *c = attn_counter_new();
    attn_tokens toks = {0};
    attn_status st = c ? ATTN_OK : attn_last_status();
    for (int64_t i = 0; st == ATTN_OK && i < train->count; i++) {
        attn_tokens_clear(&toks);
        st = attn_tokenize(&toks, ATTN_TOKENIZER_BASIC_ENGLISH, train->texts[i], strlen(train->texts[i]));
        if (st == ATTN_OK) st = attn_counter_add(c, toks.items, toks.count);
    }
    attn_vocab *v = st == ATTN_OK ? attn_vocab_build(c, specials, 2, 1, 0) : NULL;
    attn_tokens_free(&toks);
    attn_counter_free(c);
    return v;
}

/* The vocabulary checkpoint f carries (or, written by an older attn, the file beside it), with
 * the specials attn puts first. */
static attn_vocab *saved_vocab(const classify_options *o, const attn_st_file *f)
{
    char *vp = classify_vocab_path(o->train.checkpoint);
    attn_vocab *v = vp ? checkpoint_vocab("classify", f, o->train.checkpoint, "vocab", vp) : NULL;
    if (!vp) cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    free(vp);
    if (v && !vocab_has_specials("classify", o->train.checkpoint, "", v, specials, 2)) {
        attn_vocab_free(v);
        v = NULL;
    }
    return v;
}

/* The model of o; from: the checkpoint that sizes it (params_for), NULL for a new one */
static int build_model(classify_run *run, classify_options *o, const attn_st_file *from)
{
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)o->train.seed);
    o->model.vocab_size = attn_vocab_size(run->vocab);
    /* a batch's reviews packed end to end where the model allows it (2.5x the padded samples/s on
     * full IMDB, docs/results.md), unless --no-pack */
    o->model.pack = o->model.mask_padding &&
                    (o->model.attention == ATTN_CLASSIFIER_SOFTMAX || o->model.num_blocks > 0) && !o->no_pack;
    run->params = params_for(from);
    if (!run->params || attn_classifier_init(&run->model, run->params, &o->model, &rng) != ATTN_OK)
        return model_build_failed("classify", from, o->train.checkpoint);
    run->model_ready = true;
    return CLI_OK;
}

/* eval/predict/explain: the saved model and vocabulary, from one reading of the checkpoint */
static int load_model(classify_run *run, classify_options *o)
{
    attn_st_file *f = checkpoint_open("classify", o->train.checkpoint, " (train a model first: attn classify train)");
    if (!f) return CLI_ERR_DATA;
    int code = classify_load_config(o, f);
    if (code == CLI_OK && !(run->vocab = saved_vocab(o, f)))
        code = CLI_ERR_DATA;
    else if (code == CLI_OK && attn_vocab_size(run->vocab) != o->model.vocab_size)
        code = cli_fail(CLI_ERR_DATA, "classify", "%s: its vocabulary has %lld tokens but its model expects %lld",
                        o->train.checkpoint, (long long)attn_vocab_size(run->vocab), (long long)o->model.vocab_size);
    if (code == CLI_OK) code = build_model(run, o, f);
    if (code == CLI_OK && attn_checkpoint_load_file(f, run->params, NULL, true) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    attn_st_close(f);
    return code;
}

/* ---- actions ---- */

/* One split of the aclImdb folder; entries that are not regular files are reported, not read. */
static int load_reviews(attn_labeled_texts *t, const char *data, const char *split)
{
    if (attn_imdb_load(t, data, split) != ATTN_OK) return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    if (t->skipped)
        fprintf(stderr, "attn classify: note: %s/%s: skipped %lld %s (e.g. %s)\n", data, split, (long long)t->skipped,
                t->skipped == 1 ? "entry named like a review that is not a regular file"
                                : "entries named like reviews that are not regular files",
                t->skipped_first);
    return CLI_OK;
}

static int load_split(classify_split *out, const classify_run *run, const char *split)
{
    attn_labeled_texts t = {0};
    int code = load_reviews(&t, run->opt->data, split);
    if (code == CLI_OK && encode_split(out, &t, run->vocab) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    attn_labeled_texts_free(&t);
    return code;
}

/* --resume: the checkpoint, read once on rank 0, must hold the model and the run these options
 * make; its vocabulary (every id keeps its row) goes to every rank. */
static int open_resumed(classify_run *run, classify_options *o)
{
    const char *ck = o->train.checkpoint;
    char *text = NULL;
    int code = CLI_OK;
    if (dist_rank() == 0) {
        size_t len;
        if (!(run->resume = checkpoint_open("classify", ck, NULL)) ||
            checkpoint_model_check(&classify_schema, run->resume, ck) != CLI_OK ||
            !(run->vocab = saved_vocab(o, run->resume)))
            return CLI_ERR_DATA; /* the other ranks wait in share_text until the job stops */
        if (!(text = attn_vocab_text(run->vocab, &len)))
            return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
        o->model.vocab_size = attn_vocab_size(run->vocab);
        attn_classifier_config saved = o->model; /* the model these options build must be the saved one */
        int n;
        const run_option *ro = classify_run_options(o, &n);
        code = config_check_resumed(&classify_schema, run->resume, ck, &o->model, &saved);
        if (code == CLI_OK) code = run_options_check("classify", run->resume, ck, ro, n);
        if (code != CLI_OK) {
            free(text);
            return code;
        }
    }
    run->vocab_text = share_text(text);
    free(text);
    if (!run->vocab_text) return cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    if (!run->vocab && !(run->vocab = attn_vocab_parse(run->vocab_text, strlen(run->vocab_text), ck)))
        return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    return CLI_OK;
}

/* --validate: views of t (its texts not copied): the last tenth of each label's reviews, in
 * t's order (by id), in val, the others in fit. The views' arrays are malloc'd. */
static int hold_out(const attn_labeled_texts *t, attn_labeled_texts *fit, attn_labeled_texts *val)
{
    int64_t per_label[2] = {0, 0}, seen[2] = {0, 0};
    for (int64_t i = 0; i < t->count; i++) per_label[t->labels[i] != 0]++;
    if (per_label[0] < 10 || per_label[1] < 10)
        return cli_fail(CLI_ERR_DATA, "classify",
                        "--validate holds out a tenth of each label's training reviews, and needs 10 of each; "
                        "train has %lld neg and %lld pos",
                        (long long)per_label[0], (long long)per_label[1]);
    attn_labeled_texts *views[2] = {fit, val};
    for (int v = 0; v < 2; v++) {
        views[v]->texts = malloc((size_t)(t->count ? t->count : 1) * sizeof *views[v]->texts);
        views[v]->labels = malloc((size_t)(t->count ? t->count : 1) * sizeof *views[v]->labels);
        if (!views[v]->texts || !views[v]->labels) return cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    }
    for (int64_t i = 0; i < t->count; i++) {
        const int label = t->labels[i] != 0;
        attn_labeled_texts *v = seen[label]++ < per_label[label] - per_label[label] / 10 ? fit : val;
        v->texts[v->count] = t->texts[i];
        v->labels[v->count++] = t->labels[i];
    }
    return CLI_OK;
}

static int do_train(classify_run *run, classify_options *o)
{
    if (checkpoint_lock_take("classify", o->train.checkpoint, &run->lock) != CLI_OK) return CLI_ERR_DATA;
    int code = o->train.resume ? open_resumed(run, o) : CLI_OK;
    if (code != CLI_OK) return code;
    attn_labeled_texts t = {0}, fit = {0}, val = {0};
    if (load_reviews(&t, o->data, "train") != CLI_OK) return CLI_ERR_DATA;
    double t0 = now_seconds();
    code = o->validate ? hold_out(&t, &fit, &val) : CLI_OK;
    const attn_labeled_texts *train_texts = o->validate ? &fit : &t;
    size_t len;
    if (code == CLI_OK && !o->train.resume && (run->vocab = build_vocab(train_texts)))
        run->vocab_text = attn_vocab_text(run->vocab, &len);
    classify_split train = {0}, test = {0};
    if (code == CLI_OK)
        code = run->vocab && run->vocab_text && encode_split(&train, train_texts, run->vocab) == ATTN_OK &&
                       (!o->validate || encode_split(&test, &val, run->vocab) == ATTN_OK)
                   ? CLI_OK
                   : cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    free(fit.texts), free(fit.labels), free(val.texts), free(val.labels); /* views of t */
    attn_labeled_texts_free(&t);
    if (code == CLI_OK && !o->validate) code = load_split(&test, run, "test");
    if (code == CLI_OK) {
        printf("data: %lld train / %lld %s reviews from %s, vocabulary %lld tokens (%.1f s)\n", (long long)train.count,
               (long long)test.count, o->validate ? "validation (the last tenth of each label's train)" : "test",
               o->data, (long long)attn_vocab_size(run->vocab), now_seconds() - t0);
    }
    if (code == CLI_OK) code = build_model(run, o, run->resume);
    if (code == CLI_OK) {
        printf("model: %s attention, %d blocks, %lld parameters\n", attention_names[o->model.attention],
               o->model.num_blocks, (long long)attn_params_numel(run->params));
        code = classify_train(run, &train, &test);
    }
    free_split(&train);
    free_split(&test);
    return code;
}

static int do_eval(classify_run *run, classify_options *o)
{
    int code = load_model(run, o);
    classify_split test = {0};
    if (code == CLI_OK) code = load_split(&test, run, "test");
    double acc, loss;
    if (code == CLI_OK && (code = classify_evaluate(run, &test, &acc, &loss)) == CLI_OK)
        printf("test accuracy: %.2f%% (%lld reviews), test loss %.4f\n", acc, (long long)test.count, loss);
    free_split(&test);
    return code;
}

/* ids of one text, cut to max_len; returns the count (>= 1) or -1. tokens receives the words. */
static int64_t encode_text(const classify_run *run, const char *text, attn_tokens *tokens, int64_t *ids)
{
    attn_tokens_clear(tokens);
    if (attn_tokenize(tokens, ATTN_TOKENIZER_BASIC_ENGLISH, text, strlen(text)) != ATTN_OK) return -1;
    int64_t n = tokens->count < run->model.cfg.max_len ? tokens->count : run->model.cfg.max_len;
    if (n == 0) {
        ids[0] = attn_vocab_find(run->vocab, "<pad>");
        return 1;
    }
    tokens->count = n;
    return attn_vocab_encode(run->vocab, ids, tokens->items, n) == ATTN_OK ? n : -1;
}

static int predict_one(classify_run *run, attn_ctx *ctx, attn_tokens *tokens, int64_t *ids, const char *text)
{
    int64_t n = encode_text(run, text, tokens, ids);
    attn_tensor *logits = n > 0 ? attn_classifier_forward(ctx, &run->model, ids, &n, 1, n, NULL) : NULL;
    attn_tensor *p = attn_softmax(ctx, logits, -1);
    if (!p) return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    printf("%s\t%.4f\t%s\n", p->data[1] > p->data[0] ? "pos" : "neg", p->data[1], text);
    attn_ctx_reset(ctx);
    return CLI_OK;
}

static int do_predict(classify_run *run, classify_options *o, const char **texts, int n_texts)
{
    int code = load_model(run, o);
    attn_ctx *ctx = cli_ctx_new(0);
    int64_t *ids = malloc((size_t)o->model.max_len * sizeof *ids);
    attn_tokens tokens = {0};
    if (code == CLI_OK && (!ctx || !ids)) code = cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    if (code == CLI_OK) {
        attn_ctx_set_grad_enabled(ctx, false);
        attn_ctx_set_training(ctx, false);
        printf("label\tP(pos)\ttext\n");
    }
    for (int i = 0; code == CLI_OK && i < n_texts; i++) code = predict_one(run, ctx, &tokens, ids, texts[i]);
    char *line = NULL;
    size_t cap = 0;
    for (long line_no = 1;
         code == CLI_OK && n_texts == 0 && cli_stdin_line("classify", &line, &cap, line_no, &code) > 0; line_no++)
        code = predict_one(run, ctx, &tokens, ids, line);
    free(line);
    attn_tokens_free(&tokens);
    free(ids);
    attn_ctx_free(ctx);
    return code;
}

static int do_explain(classify_run *run, classify_options *o, const char **texts, int n_texts)
{
    (void)n_texts; /* one: validate() checked */
    int code = load_model(run, o);
    attn_ctx *ctx = cli_ctx_new(0);
    int64_t *ids = malloc((size_t)o->model.max_len * sizeof *ids);
    attn_tokens tokens = {0};
    if (code != CLI_OK || !ctx || !ids) goto done;
    if (o->model.attention == ATTN_CLASSIFIER_LINEAR && o->model.num_blocks == 0) {
        code = cli_fail(CLI_ERR_USAGE, "classify", "linear attention has no (L, L) weights to draw");
        goto done;
    }
    attn_ctx_set_grad_enabled(ctx, false);
    attn_ctx_set_training(ctx, false);
    int64_t n = encode_text(run, texts[0], &tokens, ids);
    attn_tensor *w = NULL, *result = NULL; /* the attention output (seed style) or the logits */
    if (n > 0 && o->seed_style_explain && o->model.attention == ATTN_CLASSIFIER_SOFTMAX && !o->model.num_blocks) {
        attn_tensor *e = attn_embedding_forward(ctx, &run->model.embedding, ids, 2, (int64_t[]){1, n});
        attn_mha_opts mo = {.average_weights = true};
        result = attn_mha_forward(ctx, &run->model.mha, e, e, e, &mo, &w);
    } else if (n > 0) {
        result = attn_classifier_forward(ctx, &run->model, ids, &n, 1, n, &w);
    }
    if (!result || !w) {
        code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
        goto done;
    }
    const char *const *labels = tokens.count ? tokens.items : (const char *const[]){"<pad>"};
    attn_heatmap_opts ho = {.title = "文本注意力权重 (attention weights, mean over heads)",
                            .xlabel = "Key",
                            .ylabel = "Query",
                            .xticks = labels,
                            .yticks = labels,
                            .auto_range = true};
    if (attn_plot_heatmap(o->out, w->data, n, n, &ho) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    else
        printf("wrote %s (%lld tokens)\n", o->out, (long long)n);
done:
    if (code == CLI_OK && (!ctx || !ids)) code = cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    attn_tokens_free(&tokens);
    free(ids);
    attn_ctx_free(ctx);
    return code;
}

int cmd_classify(int argc, char **argv)
{
    int code;
    if (cli_help_before_action(&classify_spec, argc, argv, &code)) return code;
    classify_options o;
    const char **texts = NULL;
    int n_texts = 0, action = 0, expanded_argc = 0;
    char **expanded = NULL, *recipe_words = NULL;
    code = cli_expand_recipe("classify", recipe_names, recipe_options, argc, argv, &expanded_argc, &expanded,
                             &recipe_words);
    if (code == CLI_OK) code = parse(expanded_argc, expanded, &o, &action, &texts, &n_texts);
    classify_run run = {.opt = &o, .lock = {.fd = -1}};
    if (code == CLI_OK) {
        if (action == TRAIN)
            code = do_train(&run, &o);
        else if (action == EVAL)
            code = do_eval(&run, &o);
        else if (action == PREDICT)
            code = do_predict(&run, &o, texts, n_texts);
        else
            code = do_explain(&run, &o, texts, n_texts);
    }
    free(texts);
    free(expanded);
    free(recipe_words);
    if (run.model_ready) attn_classifier_free(&run.model);
    attn_params_free(run.params);
    attn_vocab_free(run.vocab);
    free(run.vocab_text);
    attn_st_close(run.resume);
    checkpoint_lock_release(&run.lock);
    return code == CLI_HELP_SHOWN ? CLI_OK : code;
}
