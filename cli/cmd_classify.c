/* attn classify train|eval|predict|explain: seed 002's self-attention sentiment classifier on
 * IMDB reviews (aclImdb layout; the shipped mini set by default). */
#include "classify.h"
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_DATA "aclImdb_mini" /* the shipped data set: cli_default_data() */
#define DEFAULT_CHECKPOINT "classifier.safetensors"

static void help(void)
{
    printf("usage: attn classify train|eval|predict|explain [options] [TEXT ...]\n\n"
           "Seed 002's classifier: Embedding + positions + self-attention + mean pool + MLP,\n"
           "trained with Adam on IMDB reviews (label = folder pos/neg).\n\n"
           "  train             build the vocabulary, train, print the test accuracy\n"
           "  eval              test accuracy of a saved model\n"
           "  predict [TEXT]    label and probability per text (arguments, or lines of stdin)\n"
           "  explain TEXT      the attention heatmap of a text (seed 002's visualize_attention)\n\n"
           "  --data DIR        aclImdb root with train/ and test/ (default the shipped %s)\n"
           "  --attention KIND  softmax (the seed), linear, conv or additive\n"
           "  --blocks N        N Transformer blocks instead of one attention layer\n"
           "  --pre-ln          blocks are pre-LN (default post-LN, as the seed)\n"
           "  --sinusoidal      sinusoidal positions instead of the learned table\n"
           "  --mask-padding    mask padding keys and pool over real tokens (the seed does not)\n"
           "  --embed-dim N --heads N --hidden N --dropout X --additive-hidden N\n"
           "  --out FILE        explain: the heatmap (default attention.png)\n"
           "  --seed-style      explain from the embeddings alone, exactly as the seed draws it\n\n",
           DEFAULT_DATA);
    train_options_help();
    printf("\ndefaults: epochs 5, batch 32, lr 1e-3, max-len 512, checkpoint %s\n", DEFAULT_CHECKPOINT);
}

static const char *const attention_names[] = {"softmax", "linear", "conv", "additive"};

static int parse_model_option(classify_options *o, int argc, char **argv, int *i)
{
    const char *opt = argv[*i], *v;
    attn_classifier_config *m = &o->model;
    if (!strcmp(opt, "--pre-ln")) return m->norm_first = true, 1;
    if (!strcmp(opt, "--sinusoidal")) return m->sinusoidal = true, 1;
    if (!strcmp(opt, "--mask-padding")) return m->mask_padding = true, 1;
    if (!strcmp(opt, "--seed-style")) return o->seed_style_explain = true, 1;
    if (!strcmp(opt, "--data") || !strcmp(opt, "--out") || !strcmp(opt, "--attention")) {
        if (!(v = cli_value("classify", argc, argv, i))) return -1;
        if (!strcmp(opt, "--data")) o->data = v;
        else if (!strcmp(opt, "--out")) o->out = v;
        else {
            int k = 0;
            while (k < 4 && strcmp(v, attention_names[k])) k++;
            if (k == 4)
                return cli_fail(CLI_ERR_USAGE, "classify", "--attention expects softmax, linear, conv "
                                "or additive, got \"%s\"", v), -1;
            m->attention = (attn_classifier_attention)k;
        }
        return 1;
    }
    struct { const char *name; int64_t *dst; long max; } nums[] = {
        {"--embed-dim", &m->embed_dim, 4096}, {"--heads", &m->num_heads, 256},
        {"--hidden", &m->hidden_dim, 65536}, {"--additive-hidden", &m->additive_hidden, 4096},
    };
    for (int k = 0; k < 4; k++)
        if (!strcmp(opt, nums[k].name)) {
            long x;
            if (!(v = cli_value("classify", argc, argv, i)) || !cli_parse_long("classify", opt, v, 1, nums[k].max, &x))
                return -1;
            *nums[k].dst = x;
            return 1;
        }
    if (!strcmp(opt, "--blocks") || !strcmp(opt, "--dropout")) {
        if (!(v = cli_value("classify", argc, argv, i))) return -1;
        long x;
        double d;
        if (!strcmp(opt, "--blocks")) {
            if (!cli_parse_long("classify", opt, v, 0, 64, &x)) return -1;
            m->num_blocks = (int)x;
        } else {
            if (!cli_parse_float("classify", opt, v, 0.0, 0.99, &d)) return -1;
            m->dropout = (float)d;
        }
        return 1;
    }
    return 0;
}

/* Options after the action; free arguments (texts) are collected in texts. */
static int parse(int argc, char **argv, classify_options *o, const char ***texts, int *n_texts)
{
    memset(o, 0, sizeof *o);
    o->data = cli_default_data(DEFAULT_DATA);
    o->out = "attention.png";
    o->model = attn_classifier_defaults(0);
    o->train = (train_options){.epochs = 5, .batch_size = 32, .lr = 1e-3, .max_len = 512,
                               .checkpoint = DEFAULT_CHECKPOINT};
    *texts = calloc((size_t)argc, sizeof **texts);
    *n_texts = 0;
    if (!*texts) return cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help();
            return -1;
        }
        int r = train_options_parse(&o->train, "classify", argc, argv, &i);
        if (r == 0) r = parse_model_option(o, argc, argv, &i);
        if (r < 0) return CLI_ERR_USAGE;
        if (r > 0) continue;
        if (argv[i][0] == '-' && argv[i][1])
            return cli_fail(CLI_ERR_USAGE, "classify", "unknown option \"%s\" (see attn classify --help)", argv[i]);
        (*texts)[(*n_texts)++] = argv[i];
    }
    o->model.max_len = o->train.max_len;
    if (o->train.threads > 0) cli_set_threads((int)o->train.threads);
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

attn_status classify_batch(const classify_run *run, const classify_split *split, const int64_t *rows,
                           int64_t n, int64_t *ids, int64_t *lengths, int64_t *labels, int64_t *width)
{
    const attn_classifier_config *m = &run->model.cfg;
    /* the seed pads every batch to max_len; with masking, to the batch's longest review */
    *width = m->mask_padding ? attn_batch_width(&split->ids, rows, n, 0, m->max_len) : m->max_len;
    if (*width < 1) *width = 1;
    attn_pad_opts pad = {.pad_id = attn_vocab_find(run->vocab, "<pad>"), .bos_id = -1, .eos_id = -1};
    if (attn_batch_pad(ids, lengths, &split->ids, rows, &pad, n, *width) != ATTN_OK) return attn_last_status();
    for (int64_t i = 0; i < n; i++) {
        labels[i] = split->labels[rows[i]];
        if (lengths[i] == 0) lengths[i] = 1; /* an empty review still has one (padding) token */
    }
    return ATTN_OK;
}

int classify_evaluate(classify_run *run, const classify_split *split, double *accuracy, double *loss)
{
    const int64_t bs = 64, max_len = run->model.cfg.max_len;
    int64_t *ids = malloc((size_t)(bs * max_len) * sizeof *ids), lengths[64], labels[64], rows[64];
    attn_ctx *ctx = cli_ctx_new(0);
    int code = ids && ctx ? CLI_OK : cli_fail(CLI_ERR_DATA, "classify", "out of memory");
    int64_t correct = 0;
    double loss_sum = 0;
    if (ctx) {
        attn_ctx_set_grad_enabled(ctx, false);
        attn_ctx_set_training(ctx, false);
    }
    /* under mpirun each rank scores every dist_size()-th batch; the sums are added at the end */
    for (int64_t start = bs * dist_rank(); code == CLI_OK && start < split->count; start += bs * dist_size()) {
        int64_t n = split->count - start < bs ? split->count - start : bs, width;
        for (int64_t i = 0; i < n; i++) rows[i] = start + i;
        attn_tensor *logits = NULL, *l = NULL;
        if (classify_batch(run, split, rows, n, ids, lengths, labels, &width) == ATTN_OK) {
            logits = attn_classifier_forward(ctx, &run->model, ids, lengths, n, width, NULL);
            l = attn_cross_entropy(ctx, logits, labels, -100, 0.0f);
        }
        if (!l) {
            code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
            break;
        }
        loss_sum += l->data[0] * (double)n;
        for (int64_t i = 0; i < n; i++) {
            const float *row = logits->data + i * logits->shape[1];
            correct += (row[1] > row[0]) == (labels[i] == 1);
        }
        attn_ctx_reset(ctx);
    }
    double sums[2] = {(double)correct, loss_sum};
    if (code == CLI_OK) dist_sum(sums, 2);
    *accuracy = split->count ? 100.0 * sums[0] / (double)split->count : 0.0;
    *loss = split->count ? sums[1] / (double)split->count : 0.0;
    free(ids);
    attn_ctx_free(ctx);
    return code;
}

/* ---- model config in checkpoints ---- */

const char *const *classify_config_kv(const attn_classifier_config *c, int *n)
{
    static char vals[11][32];
    static const char *kv[22];
    const char *keys[11] = {"model", "vocab_size", "embed_dim", "num_heads", "hidden_dim", "max_len",
                            "attention", "num_blocks", "norm_first", "sinusoidal", "mask_padding"};
    long nums[11] = {0, (long)c->vocab_size, (long)c->embed_dim, (long)c->num_heads, (long)c->hidden_dim,
                     (long)c->max_len, (long)c->attention, c->num_blocks, c->norm_first, c->sinusoidal,
                     c->mask_padding};
    for (int i = 0; i < 11; i++) {
        if (i == 0) snprintf(vals[i], 32, "attn-classifier");
        else snprintf(vals[i], 32, "%ld", nums[i]);
        kv[2 * i] = keys[i];
        kv[2 * i + 1] = vals[i];
    }
    *n = 11;
    return kv;
}

/* The config of a saved model (its metadata), and its vocabulary (<checkpoint>.vocab). */
static int load_config(classify_options *o)
{
    attn_st_file *f = attn_st_open(o->train.checkpoint);
    if (!f) return cli_fail(CLI_ERR_DATA, "classify", "%s (train a model first: attn classify train)", attn_last_error());
    const char *model = attn_st_metadata(f, "model");
    long v[10];
    const char *keys[10] = {"vocab_size", "embed_dim", "num_heads", "hidden_dim", "max_len",
                            "attention", "num_blocks", "norm_first", "sinusoidal", "mask_padding"};
    bool ok = model && !strcmp(model, "attn-classifier");
    for (int i = 0; ok && i < 10; i++) ok = checkpoint_meta_long(f, keys[i], &v[i]);
    attn_st_close(f);
    if (!ok) return cli_fail(CLI_ERR_DATA, "classify", "%s is not a classifier checkpoint (its metadata "
                             "lacks model=attn-classifier and the model config)", o->train.checkpoint);
    attn_classifier_config *c = &o->model;
    c->vocab_size = v[0], c->embed_dim = v[1], c->num_heads = v[2], c->hidden_dim = v[3], c->max_len = v[4];
    c->attention = (attn_classifier_attention)v[5], c->num_blocks = (int)v[6];
    c->norm_first = v[7], c->sinusoidal = v[8], c->mask_padding = v[9];
    return CLI_OK;
}

static int build_model(classify_run *run, classify_options *o)
{
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)o->train.seed);
    o->model.vocab_size = attn_vocab_size(run->vocab);
    run->params = attn_params_new();
    if (!run->params || attn_classifier_init(&run->model, run->params, &o->model, &rng) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    run->model_ready = true;
    return CLI_OK;
}

static char *vocab_path(const char *checkpoint)
{
    size_t n = strlen(checkpoint) + 7;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.vocab", checkpoint);
    return p;
}

/* eval/predict/explain: the saved model and vocabulary */
static int load_model(classify_run *run, classify_options *o)
{
    int code = load_config(o);
    if (code != CLI_OK) return code;
    char *vp = vocab_path(o->train.checkpoint);
    run->vocab = vp ? attn_vocab_load(vp) : NULL;
    free(vp);
    if (!run->vocab) return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    if (attn_vocab_size(run->vocab) != o->model.vocab_size)
        return cli_fail(CLI_ERR_DATA, "classify", "the vocabulary has %lld tokens but the model expects %lld",
                        (long long)attn_vocab_size(run->vocab), (long long)o->model.vocab_size);
    if ((code = build_model(run, o)) != CLI_OK) return code;
    if (attn_checkpoint_load(o->train.checkpoint, run->params, NULL, false) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    return CLI_OK;
}

/* ---- actions ---- */

static int load_split(classify_split *out, const classify_run *run, const char *split)
{
    attn_labeled_texts t = {0};
    attn_status st = attn_imdb_load(&t, run->opt->data, split);
    if (st == ATTN_OK) st = encode_split(out, &t, run->vocab);
    attn_labeled_texts_free(&t);
    return st == ATTN_OK ? CLI_OK : cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
}

static int do_train(classify_run *run, classify_options *o)
{
    attn_labeled_texts t = {0};
    if (attn_imdb_load(&t, o->data, "train") != ATTN_OK) return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    double t0 = now_seconds();
    run->vocab = build_vocab(&t);
    classify_split train = {0}, test = {0};
    int code = run->vocab && encode_split(&train, &t, run->vocab) == ATTN_OK
                   ? CLI_OK : cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    attn_labeled_texts_free(&t);
    if (code == CLI_OK) code = load_split(&test, run, "test");
    if (code == CLI_OK) {
        printf("data: %lld train / %lld test reviews from %s, vocabulary %lld tokens (%.1f s)\n",
               (long long)train.count, (long long)test.count, o->data,
               (long long)attn_vocab_size(run->vocab), now_seconds() - t0);
        char *vp = vocab_path(o->train.checkpoint);
        if (!vp || (dist_rank() == 0 && attn_vocab_save(run->vocab, vp) != ATTN_OK))
            code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
        free(vp);
    }
    if (code == CLI_OK) code = build_model(run, o);
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
    ssize_t len;
    while (code == CLI_OK && n_texts == 0 && (len = getline(&line, &cap, stdin)) > 0) {
        if (line[len - 1] == '\n') line[len - 1] = '\0';
        code = predict_one(run, ctx, &tokens, ids, line);
    }
    free(line);
    attn_tokens_free(&tokens);
    free(ids);
    attn_ctx_free(ctx);
    return code;
}

static int do_explain(classify_run *run, classify_options *o, const char **texts, int n_texts)
{
    if (n_texts != 1)
        return cli_fail(CLI_ERR_USAGE, "classify", "explain takes one TEXT (quote it), got %d", n_texts);
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
                            .xlabel = "Key", .ylabel = "Query", .xticks = labels, .yticks = labels,
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
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help();
        return argc < 2 ? CLI_ERR_USAGE : CLI_OK;
    }
    const char *action = argv[1];
    classify_options o;
    const char **texts = NULL;
    int n_texts = 0;
    int code = parse(argc, argv, &o, &texts, &n_texts);
    classify_run run = {.opt = &o};
    if (code == CLI_OK) {
        if (!strcmp(action, "train") && n_texts == 0) code = do_train(&run, &o);
        else if (!strcmp(action, "eval") && n_texts == 0) code = do_eval(&run, &o);
        else if (!strcmp(action, "predict")) code = do_predict(&run, &o, texts, n_texts);
        else if (!strcmp(action, "explain")) code = do_explain(&run, &o, texts, n_texts);
        else if (n_texts) code = cli_fail(CLI_ERR_USAGE, "classify", "unexpected argument \"%s\"", texts[0]);
        else code = cli_fail(CLI_ERR_USAGE, "classify", "unknown action \"%s\"; expected train, eval, predict or explain", action);
    }
    free(texts);
    if (run.model_ready) attn_classifier_free(&run.model);
    attn_params_free(run.params);
    attn_vocab_free(run.vocab);
    return code < 0 ? CLI_OK : code;
}
