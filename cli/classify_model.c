/* attn classify: what training, evaluation and the other actions share: a split's batches, the
 * evaluation of a split, the model config as checkpoint metadata, and the options a resumed run
 * must keep. */
#include "classify.h"
#include "dist.h"

#include <stddef.h>
#include <stdlib.h>

attn_status classify_batch(const classify_run *run, const classify_split *split, const int64_t *rows, int64_t n,
                           int64_t *ids, int64_t *lengths, int64_t *labels, int64_t *width)
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
    int64_t *ids = malloc((size_t)(bs * max_len) * sizeof *ids); /* (bs, max_len) */
    int64_t *rows = malloc((size_t)(3 * bs) * sizeof *rows);     /* (3, bs) rows, lengths, labels */
    int64_t *lengths = rows ? rows + bs : NULL, *labels = rows ? rows + 2 * bs : NULL;
    attn_ctx *ctx = cli_ctx_new(0);
    int code = ids && rows && ctx ? CLI_OK : cli_fail(CLI_ERR_DATA, "classify", "out of memory");
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
    free(ids), free(rows);
    attn_ctx_free(ctx);
    return code;
}

/* ---- model config in checkpoints ---- */

/* The model config in checkpoint metadata; the ranges are those of the options that set it. */
_Static_assert(sizeof(attn_classifier_attention) == sizeof(int), "enums are read as int");
#define C(field) offsetof(attn_classifier_config, field)
static const config_field config_fields[] = {
    {"vocab_size", CONFIG_I64, C(vocab_size), 3, 100000000},
    {"embed_dim", CONFIG_I64, C(embed_dim), 1, 4096},
    {"num_heads", CONFIG_I64, C(num_heads), 1, 256},
    {"hidden_dim", CONFIG_I64, C(hidden_dim), 1, 65536},
    {"max_len", CONFIG_I64, C(max_len), 1, 100000},
    {"attention", CONFIG_INT, C(attention), 0, ATTN_CLASSIFIER_ADDITIVE},
    {"num_blocks", CONFIG_INT, C(num_blocks), 0, 64},
    {"norm_first", CONFIG_BOOL, C(norm_first), 0, 1},
    {"sinusoidal", CONFIG_BOOL, C(sinusoidal), 0, 1},
    {"mask_padding", CONFIG_BOOL, C(mask_padding), 0, 1},
    {"additive_hidden", CONFIG_I64, C(additive_hidden), 0, 4096, .optional = true}, /* 0: embed_dim */
    {"ngram_buckets", CONFIG_I64, C(ngram_buckets), 0, 1 << 26, .optional = true},  /* 0: none */
};
#undef C
#define N_CONFIG_FIELDS (int)(sizeof config_fields / sizeof config_fields[0])
const config_schema classify_schema = {"classify",    "attn-classifier", "classifier",
                                       config_fields, N_CONFIG_FIELDS,   NULL};

/* The config of a saved model (its metadata), range-checked before anything is built from it. */
int classify_load_config(classify_options *o, const attn_st_file *f)
{
    attn_classifier_config *c = &o->model;
    int code = config_read(&classify_schema, f, o->train.checkpoint, c);
    if (code == CLI_OK && c->embed_dim % c->num_heads != 0)
        code = cli_fail(CLI_ERR_DATA, "classify", "%s: metadata num_heads %lld does not divide embed_dim %lld",
                        o->train.checkpoint, (long long)c->num_heads, (long long)c->embed_dim);
    return code;
}

const run_option *classify_run_options(const classify_options *o, int *n)
{
    static _Thread_local run_option opts[6];
    opts[0] = (run_option){"--seed", (double)o->train.seed};
    opts[1] = (run_option){"--lr", o->train.lr};
    opts[2] = (run_option){"--dropout", (double)o->model.dropout};
    opts[3] = (run_option){"--matmul-precision", (double)o->train.matmul_precision};
    opts[4] = (run_option){"--no-pack", o->no_pack ? 1.0 : 0.0};   /* the blocks' dropout draws differ */
    opts[5] = (run_option){"--validate", o->validate ? 1.0 : 0.0}; /* another training set */
    *n = 6;
    return opts;
}
