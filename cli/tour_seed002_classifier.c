/* attn tour, seed 002 section 6 (Self-Attention实战：文本分类): the IMDB data pipeline, the
 * AttentionClassifier, and a short training run followed by visualize_attention. The reviews
 * come from --data (default the shipped mini set, 2,500 training reviews); the full training run
 * is attn classify train. */
#include "tour.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sample_text = "This movie is absolutely fantastic and captivating from start to finish";

enum {
    SEED_MAX_LEN = 512,
    BATCH = 32
};

/* The training reviews and their vocabulary (torchtext's build_vocab_from_iterator, specials
 * <unk> and <pad> first). */
typedef struct imdb {
    attn_labeled_texts train;
    attn_vocab *vocab;
    attn_id_seqs ids; /* every review through basic_english and the vocabulary */
} imdb;

static void imdb_free(imdb *d)
{
    attn_labeled_texts_free(&d->train);
    attn_vocab_free(d->vocab);
    attn_id_seqs_free(&d->ids);
}

static int imdb_load(tour_run *t, imdb *d)
{
    memset(d, 0, sizeof *d);
    if (attn_imdb_load(&d->train, t->data_dir, "train") != ATTN_OK) {
        if (!t->data_given)
            fprintf(stderr,
                    "attn tour: %s: this step reads IMDB reviews: run it from the repository "
                    "root (data/aclImdb_mini) or pass --data DIR\n",
                    t->step);
        return tour_fail(t);
    }
    static const char *const specials[2] = {"<unk>", "<pad>"};
    attn_counter *c = attn_counter_new();
    attn_tokens toks = {0};
    attn_status st = c ? ATTN_OK : attn_last_status();
    for (int64_t i = 0; st == ATTN_OK && i < d->train.count; i++) {
        attn_tokens_clear(&toks);
        st = attn_tokenize(&toks, ATTN_TOKENIZER_BASIC_ENGLISH, d->train.texts[i], strlen(d->train.texts[i]));
        if (st == ATTN_OK) st = attn_counter_add(c, toks.items, toks.count);
    }
    if (st == ATTN_OK && !(d->vocab = attn_vocab_build(c, specials, 2, 1, 0))) st = attn_last_status();
    if (st == ATTN_OK)
        st = attn_encode_texts(&d->ids, d->vocab, ATTN_TOKENIZER_BASIC_ENGLISH, (const char *const *)d->train.texts,
                               d->train.count);
    attn_tokens_free(&toks);
    attn_counter_free(c);
    return st == ATTN_OK ? CLI_OK : tour_fail(t);
}

/* The sample text's tokens and ids (text_pipeline); n ids at most. */
static int64_t sample_ids(const imdb *d, attn_tokens *toks, int64_t *ids, int64_t n)
{
    if (attn_tokenize(toks, ATTN_TOKENIZER_BASIC_ENGLISH, sample_text, strlen(sample_text)) != ATTN_OK) return -1;
    int64_t count = toks->count < n ? toks->count : n;
    return attn_vocab_encode(d->vocab, ids, toks->items, count) == ATTN_OK ? count : -1;
}

int tour_002_data(tour_run *t)
{
    imdb d;
    int code = imdb_load(t, &d);
    attn_tokens toks = {0};
    int64_t ids[64], *batch = malloc(BATCH * SEED_MAX_LEN * sizeof *batch), rows[BATCH], n = -1;
    if (code == CLI_OK && batch) n = sample_ids(&d, &toks, ids, 64);
    if (code == CLI_OK && n < 0) code = batch ? tour_fail(t) : cli_fail(CLI_ERR_DATA, "tour", "out of memory");
    attn_pad_opts pad = {.pad_id = attn_vocab_find(d.vocab, "<pad>"), .bos_id = -1, .eos_id = -1};
    if (code == CLI_OK && d.train.count < BATCH) /* the step shows the first batch of BATCH reviews */
        code = cli_fail(CLI_ERR_DATA, "tour",
                        "%s: %lld training reviews; this step shows a batch of %d, so it needs "
                        "at least %d",
                        t->step, (long long)d.train.count, BATCH, BATCH);
    for (int64_t i = 0; i < BATCH; i++) rows[i] = i;
    if (code == CLI_OK && attn_batch_pad(batch, NULL, &d.ids, rows, &pad, BATCH, SEED_MAX_LEN) != ATTN_OK)
        code = tour_fail(t);
    if (code == CLI_OK) {
        int64_t pos = 0;
        for (int64_t i = 0; i < d.train.count; i++) pos += d.train.labels[i] == 1;
        TOUR_PRINTF(t, "train reviews: %lld (%lld pos, %lld neg)\n", "训练影评：%lld 条（正面 %lld，负面 %lld）\n",
                    (long long)d.train.count, (long long)pos, (long long)(d.train.count - pos));
        printf("len(vocab): %lld   vocab['<unk>'] = %lld   vocab['<pad>'] = %lld\n",
               (long long)attn_vocab_size(d.vocab), (long long)attn_vocab_id(d.vocab, "<unk>"), (long long)pad.pad_id);
        printf("text_pipeline(\"%s\"):\n ", sample_text);
        for (int64_t i = 0; i < n; i++) printf(" %s=%lld", toks.items[i], (long long)ids[i]);
        printf("\n");
        TOUR_PRINTF(t, "first batch: labels (%d), texts (%d, %d), texts[0, :8] =",
                    "第一个批次：labels (%d)，texts (%d, %d)，texts[0, :8] =", BATCH, BATCH, SEED_MAX_LEN);
        for (int i = 0; i < 8; i++) printf(" %lld", (long long)batch[i]);
        TOUR_PRINTF(t,
                    "\nnote: torchtext's IMDB yields the labels 1 (neg) and 2 (pos), so the tutorial's\n"
                    "`1 if label=='pos' else 0` makes all %lld labels 0; attn takes the label from the\n"
                    "folder (pos/ = 1, neg/ = 0).\n",
                    "\n注意：torchtext 的 IMDB 给出的标签是整数 1（负面）和 2（正面），所以教程的\n"
                    "`1 if label=='pos' else 0` 会把全部 %lld 个标签都变成 0；attn 按所在文件夹给标签\n"
                    "（pos/ 为 1，neg/ 为 0）。\n",
                    (long long)d.train.count);
        /* the ids as float32, as torch's tensors would be saved after .float() */
        float labels_f[BATCH], sample_f[64];
        for (int i = 0; i < BATCH; i++) labels_f[i] = (float)d.train.labels[i];
        for (int64_t i = 0; i < n; i++) sample_f[i] = (float)ids[i];
        tour_keep_raw(t, "labels", labels_f, 1, (int64_t[]){BATCH});
        tour_keep_raw(t, "sample_ids", sample_f, 1, &n);
        float *texts_f = t->saved ? malloc(sizeof(float) * BATCH * SEED_MAX_LEN) : NULL;
        for (int64_t i = 0; texts_f && i < BATCH * SEED_MAX_LEN; i++) texts_f[i] = (float)batch[i];
        if (texts_f)
            tour_keep_raw(t, "texts", texts_f, 2, (int64_t[]){BATCH, SEED_MAX_LEN});
        else if (t->saved)
            t->save_status = ATTN_ERR_NOMEM;
        free(texts_f);
    }
    attn_tokens_free(&toks);
    free(batch);
    imdb_free(&d);
    return code;
}

static void print_parameters(const tour_run *t, const attn_params *p)
{
    for (size_t i = 0; i < attn_params_count(p); i++) {
        char buf[64];
        printf("  %-28s %s\n", attn_params_name(p, i), attn_shape_str(attn_params_at(p, i), buf, sizeof buf));
    }
    TOUR_PRINTF(t, "  parameters: %lld\n", "  参数总数：%lld\n", (long long)attn_params_numel(p));
}

int tour_002_model(tour_run *t)
{
    imdb d;
    int code = imdb_load(t, &d);
    attn_params *p = attn_params_new();
    attn_classifier model;
    bool ready = false;
    if (code == CLI_OK) {
        attn_classifier_config cfg = attn_classifier_defaults(attn_vocab_size(d.vocab));
        ready = p && attn_classifier_init(&model, p, &cfg, &t->rng) == ATTN_OK;
        if (!ready)
            code = tour_fail(t);
        else
            printf("AttentionClassifier(vocab_size=%lld, embed_dim=%lld, num_heads=%lld, hidden_dim=%lld, "
                   "num_classes=%lld)\n",
                   (long long)cfg.vocab_size, (long long)cfg.embed_dim, (long long)cfg.num_heads,
                   (long long)cfg.hidden_dim, (long long)cfg.num_classes);
    }
    if (ready) {
        print_parameters(t, p);
        TOUR_SAY(t,
                 "(attention.in_proj_weight stacks the tutorial's Wq, Wk and Wv weights; out_proj is fc_out)\n"
                 "criterion: CrossEntropyLoss   optimizer: Adam(lr=0.001)\n",
                 "（attention.in_proj_weight 把教程的 Wq、Wk、Wv 三个权重上下叠在一起；out_proj 即 fc_out）\n"
                 "损失函数：CrossEntropyLoss   优化器：Adam(lr=0.001)\n");
        for (size_t i = 0; i < attn_params_count(p); i++) tour_keep(t, attn_params_name(p, i), attn_params_at(p, i));
        attn_classifier_free(&model);
    }
    attn_params_free(p);
    imdb_free(&d);
    return code;
}

/* ---- 6.3: a short run of the training loop, then visualize_attention ---- */

enum {
    TRAIN_REVIEWS = 64,
    TRAIN_LEN = 32,
    TRAIN_EPOCHS = 2
};

typedef struct trainer {
    attn_classifier model;
    attn_params *p;
    attn_optim *opt;
    int64_t rows[TRAIN_REVIEWS]; /* the reviews trained on, evenly spread over the set */
    int64_t ids[BATCH * TRAIN_LEN], lengths[BATCH], labels[BATCH];
} trainer;

/* One epoch as the tutorial's loop: Adam steps on batches of 32; the mean batch loss and the
 * accuracy of the predictions made while training. */
static attn_status train_epoch(tour_run *t, trainer *tr, const imdb *d, double *loss, double *acc)
{
    attn_batches b;
    if (attn_batches_plain(&b, TRAIN_REVIEWS, BATCH, &t->rng) != ATTN_OK) return attn_last_status();
    attn_pad_opts pad = {.pad_id = attn_vocab_find(d->vocab, "<pad>"), .bos_id = -1, .eos_id = -1};
    double total_loss = 0;
    int64_t correct = 0, total = 0;
    attn_status st = ATTN_OK;
    for (int64_t k = 0; k < b.count && st == ATTN_OK; k++) {
        int64_t n = b.offsets[k + 1] - b.offsets[k], rows[BATCH];
        for (int64_t i = 0; i < n; i++) {
            rows[i] = tr->rows[b.rows[b.offsets[k] + i]];
            tr->labels[i] = d->train.labels[rows[i]];
        }
        st = attn_batch_pad(tr->ids, tr->lengths, &d->ids, rows, &pad, n, TRAIN_LEN);
        for (int64_t i = 0; i < n; i++) tr->lengths[i] += tr->lengths[i] == 0;
        attn_tensor *logits =
            st == ATTN_OK ? attn_classifier_forward(t->ctx, &tr->model, tr->ids, tr->lengths, n, TRAIN_LEN, NULL)
                          : NULL;
        attn_tensor *l = attn_cross_entropy(t->ctx, logits, tr->labels, -100, 0.0f);
        attn_params_zero_grad(tr->p);
        if (!l || attn_backward(t->ctx, l) != ATTN_OK || attn_optim_step(tr->opt) != ATTN_OK) {
            st = attn_last_status();
            break;
        }
        total_loss += l->data[0];
        for (int64_t i = 0; i < n; i++)
            correct += (logits->data[2 * i + 1] > logits->data[2 * i]) == (tr->labels[i] == 1);
        total += n;
        attn_ctx_reset(t->ctx);
    }
    *loss = total_loss / (double)b.count;
    *acc = 100.0 * (double)correct / (double)(total ? total : 1);
    attn_batches_free(&b);
    return st;
}

/* The tutorial's visualize_attention: the embeddings alone (no positions) through the attention
 * layer, weights averaged over the heads, drawn with the tokens on both axes. */
static int visualize(tour_run *t, trainer *tr, const imdb *d)
{
    attn_tokens toks = {0};
    int64_t ids[64], n = sample_ids(d, &toks, ids, 64);
    attn_ctx_set_grad_enabled(t->ctx, false);
    attn_ctx_set_training(t->ctx, false);
    attn_tensor *e = n > 0 ? attn_embedding_forward(t->ctx, &tr->model.embedding, ids, 2, (int64_t[]){1, n}) : NULL;
    attn_tensor *w = NULL;
    attn_mha_opts mean = {.average_weights = true};
    int code = e && attn_mha_forward(t->ctx, &tr->model.mha, e, e, e, &mean, &w) ? CLI_OK : tour_fail(t);
    if (code == CLI_OK) {
        tour_print_shape(TOUR_TR(t, "visualize_attention: attn_weights, mean over the 4 heads",
                                 "visualize_attention：attn_weights，4 个头的平均"),
                         w);
        tour_keep(t, "attn_weights", w);
        attn_heatmap_opts ho = {.title = "文本注意力权重",
                                .xlabel = "Key位置",
                                .ylabel = "Query位置",
                                .xticks = toks.items,
                                .yticks = toks.items,
                                .auto_range = true};
        code = tour_heatmap(t, "002_6.3_attention.png", w->data, n, n, &ho);
        TOUR_SAY(t,
                 "note: visualize_attention leaves out pos_encoding, which forward() adds; attn classify\n"
                 "explain draws the weights forward() uses (--seed-style: these).\n",
                 "注意：visualize_attention 没有加 forward() 里会加的 pos_encoding；attn classify explain\n"
                 "画的是 forward() 实际用到的权重（加 --seed-style 则与这里相同）。\n");
    }
    attn_tokens_free(&toks);
    return code;
}

int tour_002_train(tour_run *t)
{
    imdb d;
    trainer *tr = calloc(1, sizeof *tr);
    int code = tr ? imdb_load(t, &d) : cli_fail(CLI_ERR_DATA, "tour", "out of memory");
    if (!tr) return code;
    bool ready = false;
    if (code == CLI_OK) {
        attn_classifier_config cfg = attn_classifier_defaults(attn_vocab_size(d.vocab));
        cfg.max_len = TRAIN_LEN;
        attn_optim_config oc = attn_optim_defaults(ATTN_OPTIM_ADAM);
        oc.lr = 1e-3f;
        ready = (tr->p = attn_params_new()) && attn_classifier_init(&tr->model, tr->p, &cfg, &t->rng) == ATTN_OK;
        if (!ready || !(tr->opt = cli_optim_new(tr->p, &oc))) code = tour_fail(t);
        for (int64_t i = 0; i < TRAIN_REVIEWS; i++) tr->rows[i] = i * d.train.count / TRAIN_REVIEWS;
        TOUR_PRINTF(t,
                    "a short run: %d epochs over %d of the %lld reviews (half pos, half neg), max_len %d,\n"
                    "batches of %d shuffled (the tutorial: 5 epochs over 25,000 reviews, max_len 512, in file order)\n",
                    "简短的训练：在 %3$lld 条影评中取 %2$d 条（正负各半）训练 %1$d 个 epoch，max_len %4$d，\n"
                    "每批 %5$d 条、打乱顺序（教程：25,000 条影评训练 5 个 epoch，max_len 512，按文件顺序）\n",
                    TRAIN_EPOCHS, TRAIN_REVIEWS, (long long)d.train.count, TRAIN_LEN, BATCH);
    }
    attn_ctx_set_grad_enabled(t->ctx, true);
    attn_ctx_set_training(t->ctx, true);
    for (int epoch = 0; code == CLI_OK && epoch < TRAIN_EPOCHS; epoch++) {
        double loss = 0, acc = 0;
        if (train_epoch(t, tr, &d, &loss, &acc) != ATTN_OK)
            code = tour_fail(t);
        else
            printf("Epoch %d, Loss: %.4f, Acc: %.2f%%\n", epoch + 1, loss, acc);
    }
    if (code == CLI_OK) code = visualize(t, tr, &d);
    if (code == CLI_OK)
        TOUR_SAY(t, "the full run: attn classify train (see the README for its accuracy)\n",
                 "完整的训练：attn classify train（准确率见 README）\n");
    if (ready) attn_classifier_free(&tr->model);
    attn_optim_free(tr->opt);
    attn_params_free(tr->p);
    free(tr);
    imdb_free(&d);
    return code;
}
