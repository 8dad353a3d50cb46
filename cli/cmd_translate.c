/* attn translate train|eval|translate: attention-based translation (Transformer or Bahdanau
 * GRU) on Multi30k en->fr by default, corpus BLEU on test_2016_flickr, cross-attention
 * heatmaps of single translations. */
#include "translate.h"
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_DATA "multi30k" /* the shipped data set: cli_default_data() */
#define DEFAULT_CHECKPOINT "translator.safetensors"

static void help(void)
{
    printf("usage: attn translate train|eval|translate [options] [SENTENCE ...]\n\n"
           "  train               train on DATA/train.SRC.gz -> train.TGT.gz, validation loss on val,\n"
           "                      BLEU on test_2016_flickr at the end\n"
           "  eval                BLEU of a saved model on test_2016_flickr\n"
           "  translate [TEXT]    translate sentences (arguments, or lines of stdin), and draw the\n"
           "                      cross-attention of the first one\n\n"
           "  --model KIND        transformer (default) or bahdanau\n"
           "  --data DIR          folder with <split>.<lang>.gz files (default the shipped %s)\n"
           "  --src LANG --tgt LANG   languages (default en, fr)\n"
           "  --d-model N --heads N --ffn N --layers N --dropout X   model size (default 256, 8,\n"
           "                      512, 3 (encoder and decoder), 0.1)\n"
           "  --warmup N          warm-up steps of the inverse-square-root schedule (default 800)\n"
           "  --label-smoothing X (default 0.1)\n"
           "  --min-freq N        vocabulary: tokens seen at least N times (default 2)\n"
           "  --budget-min M      stop training after M minutes (then evaluate)\n"
           "  --split NAME        the split train and eval score with BLEU (default test_2016_flickr;\n"
           "                      val to tune decoding without touching the test set)\n"
           "  --eval-limit N      score only the first N sentences of that split\n"
           "  --beam N            beam size for eval, translate and the BLEU after train (default 4;\n"
           "                      1 = greedy, batched)\n"
           "  --length-penalty A  beam score = log p / ((5 + length) / 6)^A (default 0.6)\n"
           "  --keep-epochs K     train: also keep the parameters of the last K epochs as\n"
           "                      CHECKPOINT.epochN (for --average)\n"
           "  --average A,B,...   eval, translate: use the mean of the parameters of --checkpoint\n"
           "                      and these checkpoints of the same run (e.g. the last epochs')\n"
           "  --out FILE          translate: the cross-attention heatmap (default cross_attention.png)\n"
           "  --average-heads     one panel averaged over heads instead of one per head\n\n",
           DEFAULT_DATA);
    train_options_help();
    printf("\n--lr is the factor of d^-0.5 min(s^-0.5, s w^-1.5) for the Transformer (default 1), the\n"
           "constant rate for Bahdanau (default 1e-3). Defaults: epochs 30, batch 64 pairs, max-len 64,\n"
           "checkpoint %s\n", DEFAULT_CHECKPOINT);
}

static int parse_model_option(translate_options *o, int argc, char **argv, int *i)
{
    const char *opt = argv[*i], *v;
    if (!strcmp(opt, "--average-heads")) return o->average_heads = true, 1;
    const char **strs[7] = {&o->data, &o->src_lang, &o->tgt_lang, &o->out, &o->split, &o->average, NULL};
    const char *snames[7] = {"--data", "--src", "--tgt", "--out", "--split", "--average", "--model"};
    for (int k = 0; k < 7; k++)
        if (!strcmp(opt, snames[k])) {
            if (!(v = cli_value("translate", argc, argv, i))) return -1;
            if (strs[k]) *strs[k] = v;
            else if (!strcmp(v, "transformer")) o->model.kind = ATTN_SEQ2SEQ_TRANSFORMER;
            else if (!strcmp(v, "bahdanau")) o->model.kind = ATTN_SEQ2SEQ_BAHDANAU;
            else return cli_fail(CLI_ERR_USAGE, "translate", "--model expects transformer or bahdanau, got \"%s\"", v), -1;
            return 1;
        }
    long layers = -1;
    struct { const char *name; long *dst; long min, max; } nums[] = {
        {"--warmup", &o->warmup, 1, 1000000}, {"--beam", &o->beam, 1, 64},
        {"--budget-min", &o->budget_min, 1, 100000}, {"--min-freq", &o->min_freq, 1, 1000000},
        {"--eval-limit", &o->eval_limit, 1, 100000000}, {"--layers", &layers, 1, 64},
        {"--keep-epochs", &o->keep_epochs, 1, 1000},
    };
    for (int k = 0; k < 7; k++)
        if (!strcmp(opt, nums[k].name)) {
            if (!(v = cli_value("translate", argc, argv, i)) || !cli_parse_long("translate", opt, v, nums[k].min, nums[k].max, nums[k].dst))
                return -1;
            if (layers > 0) o->model.enc_layers = o->model.dec_layers = (int)layers;
            return 1;
        }
    struct { const char *name; int64_t *dst; long max; } sizes[] = {
        {"--d-model", &o->model.d_model, 8192}, {"--heads", &o->model.num_heads, 256}, {"--ffn", &o->model.dim_feedforward, 65536},
    };
    for (int k = 0; k < 3; k++)
        if (!strcmp(opt, sizes[k].name)) {
            long x;
            if (!(v = cli_value("translate", argc, argv, i)) || !cli_parse_long("translate", opt, v, 1, sizes[k].max, &x)) return -1;
            *sizes[k].dst = x;
            return 1;
        }
    if (!strcmp(opt, "--dropout") || !strcmp(opt, "--label-smoothing")) {
        double d;
        if (!(v = cli_value("translate", argc, argv, i)) || !cli_parse_float("translate", opt, v, 0.0, 0.99, &d)) return -1;
        if (!strcmp(opt, "--dropout")) o->model.dropout = (float)d;
        else o->label_smoothing = d;
        return 1;
    }
    if (!strcmp(opt, "--length-penalty")) {
        if (!(v = cli_value("translate", argc, argv, i)) || !cli_parse_float("translate", opt, v, 0.0, 10.0, &o->length_penalty)) return -1;
        return 1;
    }
    return 0;
}

static int parse(int argc, char **argv, translate_options *o, const char ***texts, int *n_texts)
{
    memset(o, 0, sizeof *o);
    o->data = cli_default_data(DEFAULT_DATA), o->src_lang = "en", o->tgt_lang = "fr", o->out = "cross_attention.png", o->split = "test_2016_flickr";
    o->model = (attn_seq2seq_config){.kind = ATTN_SEQ2SEQ_TRANSFORMER, .d_model = 256, .num_heads = 8,
                                     .dim_feedforward = 512, .enc_layers = 3, .dec_layers = 3, .dropout = 0.1f};
    o->warmup = 800, o->beam = 4, o->min_freq = 2, o->label_smoothing = 0.1, o->length_penalty = 0.6;
    o->train = (train_options){.epochs = 30, .batch_size = 64, .lr = 0, .max_len = 64, .checkpoint = DEFAULT_CHECKPOINT};
    *texts = calloc((size_t)argc, sizeof **texts);
    *n_texts = 0;
    if (!*texts) return cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help();
            return -1;
        }
        int r = train_options_parse(&o->train, "translate", argc, argv, &i);
        if (r == 0) r = parse_model_option(o, argc, argv, &i);
        if (r < 0) return CLI_ERR_USAGE;
        if (r > 0) continue;
        if (argv[i][0] == '-' && argv[i][1])
            return cli_fail(CLI_ERR_USAGE, "translate", "unknown option \"%s\" (see attn translate --help)", argv[i]);
        (*texts)[(*n_texts)++] = argv[i];
    }
    if (o->train.lr == 0) o->train.lr = o->model.kind == ATTN_SEQ2SEQ_TRANSFORMER ? 1.0 : 1e-3;
    o->model.max_len = o->train.max_len + 2; /* <bos>/<eos> */
    if (o->train.threads > 0) cli_set_threads((int)o->train.threads);
    return CLI_OK;
}

/* ---- data ---- */

static const char *const specials[4] = {"<unk>", "<pad>", "<bos>", "<eos>"};

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
    attn_vocab *v = st == ATTN_OK ? attn_vocab_build(c, specials, 4, o->min_freq, 0) : NULL;
    attn_tokens_free(&toks);
    attn_counter_free(c);
    return v;
}

static int load_split(translate_split *out, const translate_run *run, const char *split, long limit)
{
    memset(out, 0, sizeof *out);
    attn_status st = load_pairs(&out->text, run->opt, split);
    if (st == ATTN_OK && limit > 0 && out->text.count > limit) out->text.count = limit;
    if (st == ATTN_OK)
        st = attn_encode_texts(&out->src, run->src_vocab, ATTN_TOKENIZER_WORDS, (const char *const *)out->text.src, out->text.count);
    if (st == ATTN_OK)
        st = attn_encode_texts(&out->tgt, run->tgt_vocab, ATTN_TOKENIZER_WORDS, (const char *const *)out->text.tgt, out->text.count);
    return st == ATTN_OK ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
}

static void free_split(translate_split *s)
{
    attn_id_seqs_free(&s->src);
    attn_id_seqs_free(&s->tgt);
    attn_text_pairs_free(&s->text);
}

/* ---- model config, checkpoints ---- */

const char *const *translate_config_kv(const attn_seq2seq_config *c, int *n)
{
    static char vals[13][32];
    static const char *kv[26];
    const char *keys[13] = {"model", "kind", "src_vocab", "tgt_vocab", "d_model", "num_heads", "dim_feedforward",
                            "enc_layers", "dec_layers", "max_len", "pad_id", "bos_id", "eos_id"};
    long nums[13] = {0, c->kind, (long)c->src_vocab, (long)c->tgt_vocab, (long)c->d_model, (long)c->num_heads,
                     (long)c->dim_feedforward, c->enc_layers, c->dec_layers, (long)c->max_len, (long)c->pad_id,
                     (long)c->bos_id, (long)c->eos_id};
    for (int i = 0; i < 13; i++) {
        if (i == 0) snprintf(vals[i], 32, "attn-seq2seq");
        else snprintf(vals[i], 32, "%ld", nums[i]);
        kv[2 * i] = keys[i];
        kv[2 * i + 1] = vals[i];
    }
    *n = 13;
    return kv;
}

static int read_config(const char *path, attn_seq2seq_config *c, const char *hint)
{
    attn_st_file *f = attn_st_open(path);
    if (!f) return cli_fail(CLI_ERR_DATA, "translate", "%s%s", attn_last_error(), hint);
    const char *model = attn_st_metadata(f, "model");
    const char *keys[12] = {"kind", "src_vocab", "tgt_vocab", "d_model", "num_heads", "dim_feedforward",
                            "enc_layers", "dec_layers", "max_len", "pad_id", "bos_id", "eos_id"};
    long v[12];
    bool ok = model && !strcmp(model, "attn-seq2seq");
    for (int i = 0; ok && i < 12; i++) ok = checkpoint_meta_long(f, keys[i], &v[i]);
    attn_st_close(f);
    if (!ok) return cli_fail(CLI_ERR_DATA, "translate", "%s is not a translation checkpoint", path);
    c->kind = (attn_seq2seq_kind)v[0], c->src_vocab = v[1], c->tgt_vocab = v[2], c->d_model = v[3];
    c->num_heads = v[4], c->dim_feedforward = v[5], c->enc_layers = (int)v[6], c->dec_layers = (int)v[7];
    c->max_len = v[8], c->pad_id = v[9], c->bos_id = v[10], c->eos_id = v[11];
    return CLI_OK;
}

static char *vocab_path(const char *checkpoint, const char *side)
{
    size_t n = strlen(checkpoint) + strlen(side) + 8;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.%s.vocab", checkpoint, side);
    return p;
}

static int build_model(translate_run *run, translate_options *o)
{
    attn_seq2seq_config *c = &o->model;
    c->src_vocab = attn_vocab_size(run->src_vocab);
    c->tgt_vocab = attn_vocab_size(run->tgt_vocab);
    c->pad_id = attn_vocab_find(run->tgt_vocab, "<pad>");
    c->bos_id = attn_vocab_find(run->tgt_vocab, "<bos>");
    c->eos_id = attn_vocab_find(run->tgt_vocab, "<eos>");
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)o->train.seed);
    run->params = attn_params_new();
    if (!run->params || attn_seq2seq_init(&run->model, run->params, c, &rng) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    run->model_ready = true;
    return CLI_OK;
}

static bool same_model(const attn_seq2seq_config *a, const attn_seq2seq_config *b)
{
    return a->kind == b->kind && a->src_vocab == b->src_vocab && a->tgt_vocab == b->tgt_vocab &&
           a->d_model == b->d_model && a->num_heads == b->num_heads && a->dim_feedforward == b->dim_feedforward &&
           a->enc_layers == b->enc_layers && a->dec_layers == b->dec_layers && a->max_len == b->max_len &&
           a->pad_id == b->pad_id && a->bos_id == b->bos_id && a->eos_id == b->eos_id;
}

/* --average A,B,...: the parameters become the mean of --checkpoint's and those files' (checkpoint
 * averaging: the same model saved at several epochs of one run). */
static int average_checkpoints(translate_run *run, const translate_options *o)
{
    char *list = strdup(o->average), *save = NULL;
    const char **paths = calloc(strlen(o->average) / 2 + 1, sizeof *paths); /* at most one per 2 chars */
    int code = list && paths ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    int n = 0;
    for (char *path = list ? strtok_r(list, ",", &save) : NULL; code == CLI_OK && path; path = strtok_r(NULL, ",", &save)) {
        attn_seq2seq_config c = o->model;
        if ((code = read_config(path, &c, " (--average)")) != CLI_OK) break;
        if (!same_model(&c, &o->model))
            code = cli_fail(CLI_ERR_DATA, "translate", "--average: %s holds a different model than %s; expected "
                            "checkpoints of the same run", path, o->train.checkpoint);
        paths[n++] = path;
    }
    if (code == CLI_OK && n == 0)
        code = cli_fail(CLI_ERR_USAGE, "translate", "--average expects checkpoint files separated by commas, got \"%s\"",
                        o->average);
    if (code == CLI_OK && attn_checkpoint_average(run->params, paths, n) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "translate", "--average: %s", attn_last_error());
    if (code == CLI_OK) printf("parameters: the mean of %d checkpoints\n", n + 1);
    free(paths);
    free(list);
    return code;
}

static int load_model(translate_run *run, translate_options *o)
{
    int code = read_config(o->train.checkpoint, &o->model, " (train a model first: attn translate train)");
    if (code != CLI_OK) return code;
    char *sp = vocab_path(o->train.checkpoint, "src"), *tp = vocab_path(o->train.checkpoint, "tgt");
    run->src_vocab = sp ? attn_vocab_load(sp) : NULL;
    run->tgt_vocab = run->src_vocab && tp ? attn_vocab_load(tp) : NULL;
    free(sp);
    free(tp);
    if (!run->tgt_vocab) return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    if ((code = build_model(run, o)) != CLI_OK) return code;
    if (attn_checkpoint_load(o->train.checkpoint, run->params, NULL, false) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    return o->average ? average_checkpoints(run, o) : CLI_OK;
}

/* ---- actions ---- */

static int do_train(translate_run *run, translate_options *o)
{
    translate_split train = {0}, val = {0}, test = {0};
    attn_text_pairs pairs = {0};
    double t0 = now_seconds();
    if (load_pairs(&pairs, o, "train") != ATTN_OK) return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    run->src_vocab = build_vocab(o, pairs.src, pairs.count);
    run->tgt_vocab = run->src_vocab ? build_vocab(o, pairs.tgt, pairs.count) : NULL;
    attn_text_pairs_free(&pairs);
    int code = run->tgt_vocab ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    if (code == CLI_OK) {
        char *sp = vocab_path(o->train.checkpoint, "src"), *tp = vocab_path(o->train.checkpoint, "tgt");
        if (!sp || !tp || (dist_rank() == 0 && (attn_vocab_save(run->src_vocab, sp) != ATTN_OK ||
                                                attn_vocab_save(run->tgt_vocab, tp) != ATTN_OK)))
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
        free(sp);
        free(tp);
    }
    if (code == CLI_OK) code = build_model(run, o);
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
        code = translate_train(run, &train, &val);
    }
    if (code == CLI_OK) code = translate_evaluate(run, &test, o->split);
    free_split(&train);
    free_split(&val);
    free_split(&test);
    return code;
}

static int do_eval(translate_run *run, translate_options *o)
{
    translate_split test = {0};
    int code = load_model(run, o);
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
        attn_heatmap_opts ho = {.xlabel = "source (keys)", .ylabel = "output (queries)", .xticks = xlabels,
                                .yticks = ylabels};
        attn_status st;
        if (o->average_heads || H == 1) {
            ho.title = "cross-attention, mean over heads";
            st = attn_plot_heatmap(o->out, mean, T, S, &ho);
        } else {
            ho.title = "cross-attention per head (last decoder layer)";
            int cols = H >= 4 ? (int)(H / 2) : (int)H;
            st = attn_plot_heatmap_grid(o->out, w->data, (int)(H / cols), cols, T, S, NULL, &ho);
        }
        if (st != ATTN_OK) code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
        else printf("wrote %s\n", o->out);
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
    if (code == CLI_OK && !(src = malloc((size_t)(n + 1) * sizeof *src))) code = cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    if (code == CLI_OK) {
        toks.count = n;
        attn_tensor *w = NULL;
        if (attn_vocab_encode(run->src_vocab, src, toks.items, n) != ATTN_OK ||
            (src[n] = o->model.eos_id, false) ||
            attn_seq2seq_beam(ctx, &run->model, src, n + 1, (int)o->beam, (float)o->length_penalty, n + 10 < 255 ? n + 10 : 255, out,
                              &n_out, first ? &w : NULL) != ATTN_OK)
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
    int code = load_model(run, o);
    attn_ctx *ctx = cli_ctx_new(0);
    if (code == CLI_OK && !ctx) code = cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    for (int i = 0; code == CLI_OK && i < n_texts; i++) code = translate_one(run, o, ctx, texts[i], i == 0);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool first = true;
    while (code == CLI_OK && n_texts == 0 && (len = getline(&line, &cap, stdin)) > 0) {
        if (line[len - 1] == '\n') line[len - 1] = '\0';
        code = translate_one(run, o, ctx, line, first);
        first = false;
    }
    free(line);
    attn_ctx_free(ctx);
    return code;
}

int cmd_translate(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help();
        return argc < 2 ? CLI_ERR_USAGE : CLI_OK;
    }
    const char *action = argv[1];
    translate_options o;
    const char **texts = NULL;
    int n_texts = 0;
    int code = parse(argc, argv, &o, &texts, &n_texts);
    translate_run run = {.opt = &o};
    if (code == CLI_OK) {
        if (!strcmp(action, "train") && n_texts == 0) code = do_train(&run, &o);
        else if (!strcmp(action, "eval") && n_texts == 0) code = do_eval(&run, &o);
        else if (!strcmp(action, "translate")) code = do_translate(&run, &o, texts, n_texts);
        else if (n_texts) code = cli_fail(CLI_ERR_USAGE, "translate", "unexpected argument \"%s\"", texts[0]);
        else code = cli_fail(CLI_ERR_USAGE, "translate", "unknown action \"%s\"; expected train, eval or translate", action);
    }
    free(texts);
    if (run.model_ready) attn_seq2seq_free(&run.model);
    attn_params_free(run.params);
    attn_vocab_free(run.src_vocab);
    attn_vocab_free(run.tgt_vocab);
    return code < 0 ? CLI_OK : code;
}
