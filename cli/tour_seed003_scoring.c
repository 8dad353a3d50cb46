/* attn tour, seed 003's attention scoring functions (注意力评分函数) with D2L's example values:
 * masked softmax, additive attention and scaled dot-product attention on keys of ones and values
 * 0..39 with valid_lens (2, 6), the tutorial's own (4, 8) example "I love deep learning", and
 * multi-head attention / self-attention with 100 hiddens and 5 heads. Random inputs (D2L's
 * torch.rand / torch.normal) come from the step's PCG32 stream, weights as tour.h says. */
#include "tour.h"

#include <stdio.h>

/* Prints a (B, R, C) tensor as B matrices. */
static void print_batches(const char *label, const attn_tensor *x)
{
    int64_t b = x->shape[0], r = x->shape[1], c = x->shape[2];
    printf("%s:\n", label);
    for (int64_t i = 0; i < b; i++) {
        printf("[%lld]\n", (long long)i);
        tour_print_matrix(x->data + i * r * c, r, c, NULL, NULL);
    }
}

int tour_003_masked_softmax(tour_run *t)
{
    static const int64_t lens1[2] = {2, 3}, lens2[4] = {1, 3, 2, 4};
    attn_tensor *x1 = attn_tensor_empty(t->ctx, 3, (int64_t[]){2, 2, 4});
    attn_tensor *x2 = attn_tensor_empty(t->ctx, 3, (int64_t[]){2, 2, 4});
    if (!x1 || !x2) return tour_fail(t);
    attn_tensor_fill_uniform(x1, &t->rng, 0, 1); /* torch.rand(2, 2, 4) */
    attn_tensor_fill_uniform(x2, &t->rng, 0, 1);
    attn_tensor *y1 = tour_masked_softmax(t->ctx, x1, lens1, 1);
    attn_tensor *y2 = tour_masked_softmax(t->ctx, x2, lens2, 2);
    if (!y1 || !y2) return tour_fail(t);
    print_batches("masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))", y1);
    print_batches("masked_softmax(torch.rand(2, 2, 4), torch.tensor([[1, 3], [2, 4]]))", y2);
    tour_keep(t, "X1", x1);
    tour_keep(t, "X2", x2);
    tour_keep(t, "out1", y1);
    tour_keep(t, "out2", y2);
    return CLI_OK;
}

/* keys = torch.ones((2, 10, 2)), values = arange(40).reshape(1, 10, 4).repeat(2, 1, 1). */
static bool d2l_keys_values(attn_ctx *ctx, attn_tensor **keys, attn_tensor **values)
{
    *keys = attn_tensor_empty(ctx, 3, (int64_t[]){2, 10, 2});
    *values = attn_tensor_empty(ctx, 3, (int64_t[]){2, 10, 4});
    if (!*keys || !*values) return false;
    for (int64_t i = 0; i < 40; i++) (*keys)->data[i] = 1.0f;
    for (int64_t i = 0; i < 80; i++) (*values)->data[i] = (float)(i % 40);
    return true;
}

static const int64_t d2l_lens[2] = {2, 6};

int tour_003_additive(tour_run *t)
{
    attn_params *p = attn_params_new();
    attn_additive_layer m;
    attn_rng scratch;
    attn_rng_seed(&scratch, 1);
    attn_tensor *q = attn_tensor_empty(t->ctx, 3, (int64_t[]){2, 1, 20}), *k, *v, *w = NULL, *out = NULL;
    if (p && q && d2l_keys_values(t->ctx, &k, &v) &&
        attn_additive_init(&m, p, "", 20, 2, 8, 0.1f, &scratch) == ATTN_OK) {
        attn_tensor_fill_normal(q, &t->rng, 0, 1); /* torch.normal(0, 1, (2, 1, 20)) */
        tour_init_linear(&m.W_k, &t->rng);         /* D2L registers W_k, W_q, w_v */
        tour_init_linear(&m.W_q, &t->rng);
        tour_init_linear(&m.w_v, &t->rng);
        out = tour_additive_forward(t->ctx, &m, q, k, v, d2l_lens, &w);
    }
    int code = out ? CLI_OK : tour_fail(t);
    if (code == CLI_OK) {
        printf("AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1), eval()\n");
        print_batches("attention(queries, keys, values, valid_lens=[2, 6])", out);
        print_batches("attention_weights", w);
        tour_keep(t, "queries", q);
        tour_keep(t, "W_k.weight", m.W_k.weight);
        tour_keep(t, "W_q.weight", m.W_q.weight);
        tour_keep(t, "w_v.weight", m.w_v.weight);
        tour_keep(t, "output", out);
        tour_keep(t, "attention_weights", w);
        attn_heatmap_opts ho = {.xlabel = "Keys", .ylabel = "Queries", .cmap = ATTN_CMAP_REDS, .annotate = 1};
        code = tour_heatmap(t, "003_additive_weights.png", w->data, 2, 10, &ho);
    }
    attn_params_free(p);
    return code;
}

/* The tutorial's example: "I love deep learning", Q, K, V (4, 8), A = softmax(Q K^T / sqrt 8). */
static int love_deep_learning(tour_run *t)
{
    static const char *const tokens[4] = {"I", "love", "deep", "learning"};
    attn_tensor *qkv[3], *a = NULL;
    for (int i = 0; i < 3; i++) {
        if (!(qkv[i] = attn_tensor_empty(t->ctx, 3, (int64_t[]){1, 4, 8}))) return tour_fail(t);
        attn_tensor_fill_normal(qkv[i], &t->rng, 0, 1);
    }
    attn_tensor *scores = attn_matmul(t->ctx, qkv[0], qkv[1], false, true);
    attn_tensor *o = attn_sdpa(t->ctx, qkv[0], qkv[1], qkv[2], NULL, &a);
    if (!scores || !o) return tour_fail(t);
    TOUR_SAY(t, "I love deep learning: Q, K, V (4, 8)\n", "I love deep learning：Q、K、V 形状均为 (4, 8)\n");
    printf("Q @ K.T: (4, 4)   O = softmax(Q K^T / sqrt(8)) V: (4, 8)\nA =\n");
    tour_print_matrix(a->data, 4, 4, tokens, tokens);
    static const char *const names[3] = {"Q", "K", "V"};
    for (int i = 0; i < 3; i++) tour_keep(t, names[i], qkv[i]);
    tour_keep(t, "A", a);
    tour_keep(t, "O", o);
    return CLI_OK;
}

int tour_003_dot(tour_run *t)
{
    attn_tensor *q = attn_tensor_empty(t->ctx, 3, (int64_t[]){2, 1, 2}), *k, *v, *w = NULL, *out = NULL;
    float mask[20];
    if (q && d2l_keys_values(t->ctx, &k, &v)) {
        attn_tensor_fill_normal(q, &t->rng, 0, 1); /* torch.normal(0, 1, (2, 1, 2)) */
        tour_lens_mask(mask, d2l_lens, 2, 10);
        attn_sdpa_opts o = {.mask = {.additive = mask, .additive_ndim = 3, .additive_shape = {2, 1, 10}}};
        out = attn_sdpa(t->ctx, q, k, v, &o, &w);
    }
    if (!out) return tour_fail(t);
    printf("DotProductAttention(dropout=0.5), eval()\n");
    print_batches("attention(queries, keys, values, valid_lens=[2, 6])", out);
    print_batches("attention_weights", w);
    tour_keep(t, "queries", q);
    tour_keep(t, "output", out);
    tour_keep(t, "attention_weights", w);
    return love_deep_learning(t);
}

/* D2L's MultiHeadAttention(100, 5, bias=False) on inputs of ones: queries (2, 4, 100), keys and
 * values (2, lk, 100), valid_lens (3, 2). */
static attn_tensor *d2l_mha(tour_run *t, attn_params *p, const char *prefix, int64_t lk, attn_tensor **weights)
{
    attn_rng scratch;
    attn_rng_seed(&scratch, 1);
    attn_mha_layer m;
    if (attn_mha_init(&m, p, prefix, 100, 5, 0, 0, false, 0.5f, &scratch) != ATTN_OK) return NULL;
    tour_init_mha(&m, false, &t->rng); /* W_q, W_k, W_v, W_o */
    attn_tensor *x = attn_tensor_empty(t->ctx, 3, (int64_t[]){2, 4, 100});
    attn_tensor *y = attn_tensor_empty(t->ctx, 3, (int64_t[]){2, lk, 100});
    attn_tensor *mask_t = attn_tensor_empty(t->ctx, 1, (int64_t[]){2 * lk});
    if (!x || !y || !mask_t) return NULL;
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 1.0f;
    for (int64_t i = 0; i < y->numel; i++) y->data[i] = 1.0f;
    static const int64_t lens[2] = {3, 2};
    tour_lens_mask(mask_t->data, lens, 2, lk);
    attn_mha_opts o = {.mask = {.additive = mask_t->data, .additive_ndim = 4, .additive_shape = {2, 1, 1, lk}}};
    char name[64];
    static const char *const names[4] = {"W_q", "W_k", "W_v", "W_o"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s%s.weight", prefix, names[i]);
        tour_keep_raw(t, name, i < 3 ? m.in_proj_weight->data + i * 100 * 100 : m.out_proj.weight->data, 2,
                      (int64_t[]){100, 100});
    }
    return attn_mha_forward(t->ctx, &m, x, lk == 4 ? x : y, lk == 4 ? x : y, &o, weights);
}

int tour_003_multihead(tour_run *t)
{
    attn_params *p = attn_params_new();
    attn_tensor *w = NULL, *sw = NULL;
    attn_tensor *out = p ? d2l_mha(t, p, "", 6, &w) : NULL;
    attn_tensor *self = out ? d2l_mha(t, p, "self.", 4, &sw) : NULL;
    int code = self ? CLI_OK : tour_fail(t);
    if (code == CLI_OK) {
        printf("MultiHeadAttention(num_hiddens=100, num_heads=5, dropout=0.5), eval()\n");
        printf("X = torch.ones((2, 4, 100)), Y = torch.ones((2, 6, 100)), valid_lens = [3, 2]\n");
        tour_print_shape("attention(X, Y, Y, valid_lens)", out);
        TOUR_SAY(t,
                 "each head attends in its own 20 features: queries (batch, heads, 4, 20); D2L folds the\n"
                 "heads into the batch: (10, 4, 20)\n",
                 "每个头在自己的 20 维特征里做注意力：queries 为 (batch, heads, 4, 20)；D2L 把头并进批次维：\n"
                 "(10, 4, 20)\n");
        tour_print_shape(
            TOUR_TR(t, "attention weights (batch, heads, queries, keys)", "注意力权重 (batch, heads, queries, keys)"),
            w);
        TOUR_SAY(t, "weights[0, 0, 0] (valid_len 3) and weights[1, 0, 0] (valid_len 2), keys all equal:\n",
                 "weights[0, 0, 0]（valid_len 3）与 weights[1, 0, 0]（valid_len 2），所有键都相同：\n");
        tour_print_matrix(w->data, 1, 6, NULL, NULL);
        tour_print_matrix(w->data + 5 * 4 * 6, 1, 6, NULL, NULL);
        tour_print_shape(
            TOUR_TR(t, "self-attention: attention(X, X, X, valid_lens)", "自注意力：attention(X, X, X, valid_lens)"),
            self);
        tour_keep(t, "output", out);
        tour_keep(t, "attention_weights", w);
        tour_keep(t, "self.output", self);
    }
    attn_params_free(p);
    return code;
}
