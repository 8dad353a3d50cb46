/* Seed 002's self-attention text classifier (math and names in attn.h):
 *   x = embedding(ids) + positions;  h = attention(x) (or N Transformer blocks)
 *   pooled = mean over positions;  logits = fc2(dropout(relu(fc1(pooled)))) */
#include "../core/core_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

attn_classifier_config attn_classifier_defaults(int64_t vocab_size)
{
    return (attn_classifier_config){.vocab_size = vocab_size,
                                    .embed_dim = 128,
                                    .num_heads = 4,
                                    .hidden_dim = 256,
                                    .num_classes = 2,
                                    .max_len = 512,
                                    .attention = ATTN_CLASSIFIER_SOFTMAX,
                                    .dropout = 0.5f,
                                    .block_dropout = 0.1f};
}

static attn_status init_attention(attn_classifier *m, attn_params *p, attn_rng *rng)
{
    const attn_classifier_config *c = &m->cfg;
    if (c->num_blocks > 0) {
        m->blocks = calloc((size_t)c->num_blocks, sizeof *m->blocks);
        if (!m->blocks) return attn__fail(ATTN_ERR_NOMEM, "classifier: out of memory");
        attn_transformer_config tc = {.d_model = c->embed_dim,
                                      .num_heads = c->num_heads,
                                      .dim_feedforward = 4 * c->embed_dim,
                                      .dropout = c->block_dropout,
                                      .norm_first = c->norm_first};
        for (int i = 0; i < c->num_blocks; i++) {
            char name[64];
            snprintf(name, sizeof name, "blocks.%d", i);
            if (attn_encoder_layer_init(&m->blocks[i], p, name, &tc, rng) != ATTN_OK) return attn_last_status();
        }
        return ATTN_OK;
    }
    switch (c->attention) {
    case ATTN_CLASSIFIER_SOFTMAX:
        return attn_mha_init(&m->mha, p, "attention", c->embed_dim, c->num_heads, 0, 0, true, 0.0f, rng);
    case ATTN_CLASSIFIER_LINEAR:
        return attn_linear_attention_init(&m->linear, p, "attention", c->embed_dim, ATTN_LINEAR_ATTENTION_EFFICIENT,
                                          rng);
    case ATTN_CLASSIFIER_CONV:
        return attn_conv_attention_init(&m->conv, p, "attention", c->embed_dim, c->num_heads, 3, rng);
    case ATTN_CLASSIFIER_ADDITIVE: {
        int64_t h = c->additive_hidden > 0 ? c->additive_hidden : c->embed_dim;
        return attn_additive_init(&m->additive, p, "attention", c->embed_dim, c->embed_dim, h, 0.0f, rng);
    }
    }
    return attn__fail(ATTN_ERR_ARG, "classifier: unknown attention variant %d", (int)c->attention);
}

static attn_status init_classifier(attn_classifier *m, attn_params *p, const attn_classifier_config *cfg, attn_rng *rng)
{
    if (!m || !p || !cfg) return attn__fail(ATTN_ERR_ARG, "classifier_init: NULL argument");
    if (cfg->vocab_size < 1 || cfg->embed_dim < 1 || cfg->max_len < 1 || cfg->num_classes < 1 || cfg->hidden_dim < 1 ||
        cfg->num_blocks < 0 || !(cfg->dropout >= 0 && cfg->dropout < 1) || cfg->additive_hidden < 0 ||
        cfg->ngram_buckets < 0)
        return attn__fail(ATTN_ERR_ARG, "classifier_init: sizes must be >= 1, blocks, additive_hidden and "
                                        "ngram_buckets >= 0, and dropout in [0, 1)");
    if (cfg->pack && !(cfg->mask_padding && (cfg->attention == ATTN_CLASSIFIER_SOFTMAX || cfg->num_blocks > 0)))
        return attn__fail(ATTN_ERR_ARG,
                          "classifier_init: pack needs mask_padding, and Transformer blocks or the "
                          "softmax attention (mask_padding %d, attention %d, blocks %d)",
                          (int)cfg->mask_padding, (int)cfg->attention, cfg->num_blocks);
    if (cfg->sinusoidal && cfg->embed_dim % 2)
        return attn__fail(ATTN_ERR_ARG,
                          "classifier_init: sinusoidal positions need an even embed_dim, "
                          "not %lld",
                          (long long)cfg->embed_dim);
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (attn_embedding_init(&m->embedding, p, "embedding", cfg->vocab_size, cfg->embed_dim, -1, rng) != ATTN_OK)
        return attn_last_status();
    if (!cfg->sinusoidal &&
        attn_learned_pe_init(&m->pos, p, "pos_encoding", cfg->max_len, cfg->embed_dim, rng) != ATTN_OK)
        return attn_last_status();
    if (cfg->ngram_buckets > 0) {
        if (cfg->ngram_buckets > INT64_MAX - cfg->vocab_size)
            return attn__fail(ATTN_ERR_ARG, "classifier_init: vocab_size + ngram_buckets overflows int64");
        const int64_t rows = cfg->vocab_size + cfg->ngram_buckets;
        if (!(m->ngrams = attn_params_add(p, "ngrams.weight", 2, (int64_t[]){rows, cfg->num_classes})))
            return attn_last_status(); /* zeros: the bag starts adding nothing */
    }
    if (init_attention(m, p, rng) != ATTN_OK ||
        attn_linear_init(&m->fc1, p, "classifier.0", cfg->embed_dim, cfg->hidden_dim, true, rng) != ATTN_OK ||
        attn_linear_init(&m->fc2, p, "classifier.3", cfg->hidden_dim, cfg->num_classes, true, rng) != ATTN_OK) {
        attn_classifier_free(m); /* the blocks' array, when a later parameter could not be had */
        return attn_last_status();
    }
    return ATTN_OK;
}

attn_status attn_classifier_init(attn_classifier *m, attn_params *p, const attn_classifier_config *cfg, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_classifier(m, p, cfg, rng));
}

void attn_classifier_free(attn_classifier *m)
{
    if (!m) return;
    free(m->blocks);
    m->blocks = NULL;
}

/* (B, L) padding mask, 1 = padding, in the arena. */
static uint8_t *padding_of(attn_ctx *ctx, const int64_t *lengths, int64_t batch, int64_t len)
{
    uint8_t *pad = attn__arena_alloc(&ctx->arena, (size_t)(batch * len));
    if (pad)
        for (int64_t b = 0; b < batch; b++)
            for (int64_t j = 0; j < len; j++) pad[b * len + j] = j >= lengths[b];
    return pad;
}

static attn_tensor *attention(attn_ctx *ctx, const attn_classifier *m, attn_tensor *x, const uint8_t *pad,
                              const int64_t *lengths, attn_tensor **weights)
{
    const attn_classifier_config *c = &m->cfg;
    const int64_t B = x->shape[0], L = x->shape[1];
    attn_mha_opts opts = {.average_weights = true};
    opts.mask.key_padding = pad;
    opts.mask.key_padding_shape[0] = B;
    opts.mask.key_padding_shape[1] = L;
    const attn_lens lens = {.data = pad ? lengths : NULL, .ndim = 1, .shape = {B}};
    if (c->num_blocks > 0) {
        attn_tensor *w = NULL;
        for (int i = 0; i < c->num_blocks && x; i++)
            x = attn_encoder_layer_forward(ctx, &m->blocks[i], x, &opts.mask,
                                           weights && i == c->num_blocks - 1 ? &w : NULL);
        if (weights && w) {
            bool grad = attn_ctx_grad_enabled(ctx);
            attn_ctx_set_grad_enabled(ctx, false);
            *weights = attn_mean(ctx, w, 1, false);
            attn_ctx_set_grad_enabled(ctx, grad);
        }
        return x;
    }
    switch (c->attention) {
    case ATTN_CLASSIFIER_SOFTMAX:
        return attn_mha_forward(ctx, &m->mha, x, x, x, &opts, weights);
    case ATTN_CLASSIFIER_LINEAR:
        return attn_linear_attention_forward(ctx, &m->linear, x, &opts.mask);
    case ATTN_CLASSIFIER_CONV:
        return attn_conv_attention_forward(ctx, &m->conv, x, &opts, weights);
    case ATTN_CLASSIFIER_ADDITIVE:
        return attn_additive_forward(ctx, &m->additive, x, x, x, &lens, weights);
    }
    return NULL;
}

/* Mean over positions: all of them (the seed), or the first lengths[b] (mask_padding). */
static attn_tensor *pool(attn_ctx *ctx, attn_tensor *h, const int64_t *lengths, bool mask_padding)
{
    if (!mask_padding) return attn_mean(ctx, h, 1, false);
    const int64_t B = h->shape[0], L = h->shape[1];
    attn_tensor *w = attn_tensor_zeros(ctx, 3, (int64_t[]){B, L, 1}); /* 1/len on real tokens */
    if (!w) return NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t n = lengths[b] < L ? lengths[b] : L;
        for (int64_t j = 0; j < n; j++) w->data[b * L + j] = 1.0f / (float)n;
    }
    return attn_sum(ctx, attn_mul(ctx, h, w), 1, false);
}

/* The padded batch (B, len, E) through the attention, pooled (B, E) */
static attn_tensor *padded_pooled(attn_ctx *ctx, const attn_classifier *m, const int64_t *ids, const int64_t *lengths,
                                  int64_t batch, int64_t len, attn_tensor **weights)
{
    attn_tensor *x = attn_embedding_forward(ctx, &m->embedding, ids, 2, (int64_t[]){batch, len});
    if (m->cfg.sinusoidal)
        x = attn_add_positions(ctx, x, attn_sinusoidal_table(ctx, len, m->cfg.embed_dim, ATTN_PE_INTERLEAVED));
    else
        x = attn_learned_pe_forward(ctx, &m->pos, x);
    if (!x) return NULL;
    uint8_t *pad = m->cfg.mask_padding ? padding_of(ctx, lengths, batch, len) : NULL;
    attn_tensor *h = attention(ctx, m, x, pad, lengths, weights);
    return h ? pool(ctx, h, lengths, m->cfg.mask_padding) : NULL;
}

/* cfg.pack: the batch's sequences end to end, (total, E) from the embedding on (the real tokens
 * only), attention by attn_mha_forward_packed (blocks: attn_encoder_layer_forward_packed), and the mean of each sequence's rows as a (B, total)
 * matrix of 1 / len_b times them: pooled (B, E), what pool() gives the padded batch with
 * mask_padding. */
static attn_tensor *packed_pooled(attn_ctx *ctx, const attn_classifier *m, const int64_t *ids, const int64_t *lengths,
                                  int64_t batch, int64_t len)
{
    const int64_t E = m->cfg.embed_dim;
    int64_t *cu = attn__arena_alloc(&ctx->arena, sizeof(int64_t) * (size_t)(batch + 1)); /* (B + 1) */
    if (!cu) return NULL;
    cu[0] = 0;
    for (int64_t b = 0; b < batch; b++) cu[b + 1] = cu[b] + lengths[b]; /* lengths in [1, len]: no overflow */
    const int64_t total = cu[batch];
    int64_t *tokens = attn__arena_alloc(&ctx->arena, sizeof(int64_t) * (size_t)total); /* (total) ids */
    const int64_t *positions = attn__cu_positions(ctx, cu, batch);                     /* (total) in its sequence */
    attn_tensor *mean = attn_tensor_zeros(ctx, 2, (int64_t[]){batch, total});          /* (B, total) */
    if (!tokens || !positions || !mean) return NULL;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t j = 0; j < lengths[b]; j++) {
            tokens[cu[b] + j] = ids[b * len + j];
            mean->data[b * total + cu[b] + j] = 1.0f / (float)lengths[b];
        }
    attn_tensor *table = m->cfg.sinusoidal ? attn_sinusoidal_table(ctx, len, E, ATTN_PE_INTERLEAVED)
                                           : attn_reshape(ctx, m->pos.table, 2, (int64_t[]){m->cfg.max_len, E});
    attn_tensor *x = attn_add(ctx, attn_embedding_forward(ctx, &m->embedding, tokens, 1, &total),
                              table ? attn_embedding(ctx, table, positions, 1, &total, -1) : NULL); /* (total, E) */
    attn_tensor *h = x;
    if (m->cfg.num_blocks == 0) h = attn_mha_forward_packed(ctx, &m->mha, x, cu, batch, false);
    for (int i = 0; i < m->cfg.num_blocks && h; i++)
        h = attn_encoder_layer_forward_packed(ctx, &m->blocks[i], h, cu, batch);
    return attn_matmul(ctx, mean, h, false, false);
}

int64_t attn_classifier_bigram_bucket(int64_t a, int64_t b, int64_t vocab_size, int64_t buckets)
{
    if (vocab_size < 1 || buckets < 1 || a < 0 || b < 0 || a >= vocab_size || b >= vocab_size) return -1;
    uint64_t z = (uint64_t)a * (uint64_t)vocab_size + (uint64_t)b; /* modulo 2^64 past vocab_size 2^32 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (int64_t)(z % (uint64_t)buckets);
}

/* The n-gram bag's (B, classes): each sequence's unigram and bigram rows of m->ngrams, summed
 * and times ATTN_CLASSIFIER_NGRAM_GAIN / sqrt(their count), as a (B, grams) matrix of those
 * weights times the rows. */
static attn_tensor *ngram_logits(attn_ctx *ctx, const attn_classifier *m, const int64_t *ids, const int64_t *lengths,
                                 int64_t batch, int64_t len)
{
    const int64_t V = m->cfg.vocab_size;
    int64_t grams = 0;
    for (int64_t b = 0; b < batch; b++) grams += 2 * lengths[b] - 1;                 /* lengths in [1, len] */
    int64_t *rows = attn__arena_alloc(&ctx->arena, sizeof(int64_t) * (size_t)grams); /* (grams) */
    attn_tensor *scale = attn_tensor_zeros(ctx, 2, (int64_t[]){batch, grams});       /* (B, grams) */
    if (!rows || !scale) return NULL;
    int64_t g = 0;
    for (int64_t b = 0; b < batch; b++) {
        const int64_t *seq = ids + b * len, n = lengths[b];
        const float w = ATTN_CLASSIFIER_NGRAM_GAIN / sqrtf((float)(2 * n - 1));
        for (int64_t j = 0; j < 2 * n - 1; j++) scale->data[b * grams + g + j] = w;
        for (int64_t j = 0; j < n; j++) rows[g++] = seq[j];
        for (int64_t j = 0; j + 1 < n; j++) {
            int64_t bucket = attn_classifier_bigram_bucket(seq[j], seq[j + 1], V, m->cfg.ngram_buckets);
            rows[g++] = bucket < 0 ? -1 : V + bucket; /* an id out of range: attn_embedding's error */
        }
    }
    return attn_matmul(ctx, scale, attn_embedding(ctx, m->ngrams, rows, 1, &grams, -1), false, false);
}

attn_tensor *attn_classifier_forward(attn_ctx *ctx, const attn_classifier *m, const int64_t *ids,
                                     const int64_t *lengths, int64_t batch, int64_t len, attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !m || !ids || !lengths) return attn__null_input(__func__);
    int64_t n_ids;
    if (batch < 1 || len < 1 || len > m->cfg.max_len || !attn__mul_ok(batch, len, &n_ids))
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "classifier: batch %lld x length %lld; expected "
                               "length in [1, %lld] and batch x length within int64",
                               (long long)batch, (long long)len, (long long)m->cfg.max_len);
    for (int64_t b = 0; b < batch; b++)
        if (lengths[b] < 1 || lengths[b] > len)
            return attn__fail_null(ATTN_ERR_ARG, "classifier: lengths[%lld] = %lld; expected in [1, %lld]",
                                   (long long)b, (long long)lengths[b], (long long)len);
    attn_tensor *pooled = m->cfg.pack && !weights /* a batch's weights come from the padded path */
                              ? packed_pooled(ctx, m, ids, lengths, batch, len)
                              : padded_pooled(ctx, m, ids, lengths, batch, len, weights);
    attn_tensor *hidden = attn_dropout(ctx, attn_relu(ctx, attn_linear_forward(ctx, &m->fc1, pooled)), m->cfg.dropout);
    attn_tensor *logits = attn_linear_forward(ctx, &m->fc2, hidden);
    return m->ngrams && logits ? attn_add(ctx, logits, ngram_logits(ctx, m, ids, lengths, batch, len)) : logits;
}
