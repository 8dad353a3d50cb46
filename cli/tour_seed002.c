/* attn tour, seed 002 (Self-Attention机制) sections 1 to 5: the projections, scaled dot-product
 * attention and its heatmap, MultiHeadAttention(8, 2) and one heatmap per head, the three uses in
 * a Transformer, TransformerBlock, ConvAttention and EfficientAttention, all on the section 1.2
 * input x (1, 4, 8). Modules come from the library; weights from tour_uniform (tour.h). */
#include "tour.h"

#include <math.h>
#include <stdio.h>

static const char *const words[4] = {"词1", "词2", "词3", "词4"};

/* Section 1.2: x = torch.tensor([[[1.0, 0.5, ...]]]), (1, 4, 8). */
static attn_tensor *seed_input(attn_ctx *ctx)
{
    static const float x[4][8] = {
        {1.0f, 0.5f, 0.8f, 2.0f, 0.1f, 1.5f, 0.3f, 1.2f},
        {0.7f, 1.2f, 0.4f, 1.8f, 0.9f, 0.6f, 1.1f, 0.2f},
        {1.3f, 0.3f, 1.7f, 0.6f, 1.4f, 0.8f, 0.5f, 1.9f},
        {0.2f, 1.5f, 1.1f, 0.7f, 0.3f, 1.8f, 1.6f, 0.4f},
    };
    return attn_tensor_from(ctx, 3, (int64_t[]){1, 4, 8}, &x[0][0]);
}

/* A params registry and a throwaway RNG for the library's own init, which the tour overwrites. */
typedef struct modules {
    attn_params *p;
    attn_rng scratch;
} modules;

static bool modules_open(modules *m)
{
    attn_rng_seed(&m->scratch, 1);
    return (m->p = attn_params_new()) != NULL;
}

static int done(tour_run *t, modules *m, int code)
{
    attn_params_free(m->p);
    return code == CLI_ERR_DATA && attn_last_status() != ATTN_OK ? tour_fail(t) : code;
}

/* Section 1.2: x and SelfAttention(8)'s Q, K, V = Wq(x), Wk(x), Wv(x), each Linear(8, 8). */
static bool self_attention_qkv(tour_run *t, modules *m, attn_tensor **x, attn_tensor **qkv)
{
    static const char *const names[3] = {"Wq", "Wk", "Wv"}, *const outputs[3] = {"Q", "K", "V"};
    if (!(*x = seed_input(t->ctx))) return false;
    tour_keep(t, "x", *x);
    for (int i = 0; i < 3; i++) {
        attn_linear_layer l;
        if (attn_linear_init(&l, m->p, names[i], 8, 8, true, &m->scratch) != ATTN_OK) return false;
        tour_init_linear(&l, &t->rng);
        tour_keep(t, attn_params_name(m->p, 2 * (size_t)i), l.weight);
        tour_keep(t, attn_params_name(m->p, 2 * (size_t)i + 1), l.bias);
        if (!(qkv[i] = attn_linear_forward(t->ctx, &l, *x))) return false;
        tour_keep(t, outputs[i], qkv[i]);
    }
    return true;
}

/* Section 2.1's scaled_dot_product_attention on section 1.2's Q, K, V: weights (1, 4, 4). */
static attn_tensor *sdpa_of_x(tour_run *t, modules *m, attn_tensor **weights)
{
    attn_tensor *x, *qkv[3];
    return self_attention_qkv(t, m, &x, qkv) ? attn_sdpa(t->ctx, qkv[0], qkv[1], qkv[2], NULL, weights) : NULL;
}

int tour_002_qkv(tour_run *t)
{
    modules m;
    attn_tensor *x, *qkv[3];
    if (!modules_open(&m) || !self_attention_qkv(t, &m, &x, qkv)) return done(t, &m, CLI_ERR_DATA);
    tour_print_shape(TOUR_TR(t, "输入序列形状 (input shape)", "输入序列形状"), x);
    tour_print_shape(TOUR_TR(t, "Query形状 (Query shape)", "Query形状"), qkv[0]);
    tour_print_shape(TOUR_TR(t, "Key形状 (Key shape)", "Key形状"), qkv[1]);
    tour_print_shape(TOUR_TR(t, "Value形状 (Value shape)", "Value形状"), qkv[2]);
    return done(t, &m, CLI_OK);
}

/* A step that prints and keeps an attention's output and weights (NULL output: it failed). */
static int output_and_weights(tour_run *t, modules *m, attn_tensor *out, attn_tensor *w, const char *out_label,
                              const char *w_label)
{
    if (!out) return done(t, m, CLI_ERR_DATA);
    tour_print_shape(out_label, out);
    tour_print_shape(w_label, w);
    tour_keep(t, "output", out);
    tour_keep(t, "attn_weights", w);
    return done(t, m, CLI_OK);
}

int tour_002_sdpa(tour_run *t)
{
    modules m;
    attn_tensor *w = NULL, *out = modules_open(&m) ? sdpa_of_x(t, &m, &w) : NULL;
    return output_and_weights(t, &m, out, w, TOUR_TR(t, "注意力输出形状 (attention output shape)", "注意力输出形状"),
                              TOUR_TR(t, "注意力权重形状 (attention weights shape)", "注意力权重形状"));
}

int tour_002_heatmap(tour_run *t)
{
    modules m;
    attn_tensor *w = NULL, *out = modules_open(&m) ? sdpa_of_x(t, &m, &w) : NULL;
    if (!out) return done(t, &m, CLI_ERR_DATA);
    TOUR_SAY(t, "Self-Attention权重矩阵 (rows: Query位置, columns: Key位置):\n",
             "Self-Attention权重矩阵（行：Query位置，列：Key位置）：\n");
    tour_print_matrix(w->data, 4, 4, words, words);
    tour_keep(t, "attn_weights", w);
    attn_heatmap_opts ho = {.title = "Self-Attention权重矩阵",
                            .xlabel = "Key位置",
                            .ylabel = "Query位置",
                            .xticks = words,
                            .yticks = words,
                            .auto_range = true,
                            .annotate = 1};
    int code = tour_heatmap(t, "002_2.2_weights.png", w->data, 4, 4, &ho);
    if (code == CLI_OK)
        TOUR_SAY(t, "the argument for dividing by √d_k (缩放因子的数学意义): attn tour 003/sqrt-d\n",
                 "为什么要除以 √d_k（缩放因子的数学意义）：见 attn tour 003/sqrt-d\n");
    return done(t, &m, code);
}

/* Section 3.2's MultiHeadAttention(8, 2) on x: output (1, 4, 8), weights per head (1, 2, 4, 4). */
static attn_tensor *mha_of_x(tour_run *t, modules *m, attn_tensor **weights)
{
    attn_mha_layer mha;
    attn_tensor *x = seed_input(t->ctx);
    if (!x || attn_mha_init(&mha, m->p, "", 8, 2, 0, 0, true, 0.0f, &m->scratch) != ATTN_OK) return NULL;
    tour_init_mha(&mha, true, &t->rng);
    tour_keep(t, "x", x);
    tour_keep_mha(t, "", &mha);
    return attn_mha_forward(t->ctx, &mha, x, x, x, &(attn_mha_opts){.average_weights = false}, weights);
}

int tour_002_mha(tour_run *t)
{
    modules m;
    attn_tensor *w = NULL, *out = modules_open(&m) ? mha_of_x(t, &m, &w) : NULL;
    return output_and_weights(t, &m, out, w,
                              TOUR_TR(t, "多头注意力输出形状 (multi-head output shape)", "多头注意力输出形状"),
                              TOUR_TR(t, "多头注意力权重形状 (multi-head weights shape)", "多头注意力权重形状"));
}

int tour_002_heads(tour_run *t)
{
    modules m;
    attn_tensor *w = NULL, *out = modules_open(&m) ? mha_of_x(t, &m, &w) : NULL;
    if (!out) return done(t, &m, CLI_ERR_DATA);
    /* plt.subplots(1, num_heads): each head its own imshow, so its own colour scale and bar, titled
     * f'头 {i+1} 注意力权重', the weights in white, matplotlib's tick numbers 0..3 on both axes */
    static const char *const titles[2] = {"头 1 注意力权重", "头 2 注意力权重"};
    static const char *const names[2] = {"002_3.3_head1.png", "002_3.3_head2.png"};
    int code = CLI_OK;
    for (int h = 0; h < 2; h++) {
        if (t->zh)
            printf("%s：\n", titles[h]);
        else
            printf("%s (head %d):\n", titles[h], h + 1);
        tour_print_matrix(w->data + h * 16, 4, 4, NULL, NULL);
    }
    tour_keep(t, "attn_weights", w);
    for (int h = 0; h < 2 && code == CLI_OK; h++) {
        attn_heatmap_opts ho = {
            .title = titles[h], .xlabel = "Key位置", .ylabel = "Query位置", .auto_range = true, .annotate = 1};
        code = tour_heatmap(t, names[h], w->data + h * 16, 4, 4, &ho);
    }
    if (code == CLI_OK)
        TOUR_SAY(t, "each head has its own colour scale, as the tutorial's plt.subplots draws them\n",
                 "与教程的 plt.subplots 一样，每个头用自己的颜色刻度\n");
    return done(t, &m, code);
}

/* Section 4.2: the tutorial never defines src and tgt; here src = x and tgt is 3 words of 8
 * features drawn like x (one decimal, in [0, 2)). */
int tour_002_modes(tour_run *t)
{
    modules m;
    attn_mha_layer enc, dec, cross;
    attn_tensor *src = seed_input(t->ctx), *tgt = attn_tensor_empty(t->ctx, 3, (int64_t[]){1, 3, 8});
    if (!modules_open(&m) || !src || !tgt) return done(t, &m, CLI_ERR_DATA);
    for (int64_t i = 0; i < tgt->numel; i++) tgt->data[i] = roundf(attn_rng_uniform(&t->rng) * 20.0f) / 10.0f;
    attn_mha_layer *layers[3] = {&enc, &dec, &cross};
    static const char *const prefixes[3] = {"encoder_self_attn.", "decoder_self_attn.", "cross_attn."};
    for (int i = 0; i < 3; i++) {
        if (attn_mha_init(layers[i], m.p, prefixes[i], 8, 2, 0, 0, true, 0.0f, &m.scratch) != ATTN_OK)
            return done(t, &m, CLI_ERR_DATA);
        tour_init_mha(layers[i], true, &t->rng);
        tour_keep_mha(t, prefixes[i], layers[i]);
    }
    attn_mha_opts plain = {.average_weights = false}, causal = {.mask.causal = true, .average_weights = true};
    attn_tensor *dec_w = NULL, *cross_w = NULL;
    attn_tensor *enc_out = attn_mha_forward(t->ctx, &enc, src, src, src, &plain, NULL);
    attn_tensor *dec_out = attn_mha_forward(t->ctx, &dec, tgt, tgt, tgt, &causal, &dec_w);
    attn_tensor *cross_out = attn_mha_forward(t->ctx, &cross, dec_out, enc_out, enc_out, &plain, &cross_w);
    if (!cross_out) return done(t, &m, CLI_ERR_DATA);
    tour_print_shape("src", src);
    tour_print_shape("tgt", tgt);
    tour_print_shape("编码器自注意力 encoder_output", enc_out);
    tour_print_shape("解码器自注意力 decoder_output", dec_out);
    TOUR_SAY(t, "decoder self-attention weights, mean over the 2 heads (zero above the diagonal):\n",
             "解码器自注意力的权重，2 个头的平均（对角线以上为 0）：\n");
    tour_print_matrix(dec_w->data, 3, 3, NULL, NULL);
    tour_print_shape("编码器-解码器注意力 cross_output", cross_out);
    tour_print_shape(TOUR_TR(t, "cross-attention weights (tgt x src)", "交叉注意力权重（tgt × src）"), cross_w);
    TOUR_SAY(t,
             "note: the tutorial's MultiHeadAttention.forward takes mask but never passes it on, so\n"
             "its decoder self-attention sees future words; attn applies the causal mask it means.\n"
             "(create_mask gives 1 where allowed and -inf above the diagonal: right as an additive\n"
             "mask; under tutorial 000's masked_fill(mask == 0, -inf) it would hide nothing.)\n",
             "注意：教程的 MultiHeadAttention.forward 接收了 mask，却没有往下传，所以它的解码器自注意力\n"
             "能看到后面的词；attn 按教程的本意加上了因果掩码。\n"
             "（create_mask 在允许的位置给 1、对角线以上给 -inf：作为加性掩码是对的；若按教程 000 的\n"
             "masked_fill(mask == 0, -inf) 来用，它什么也遮不住。）\n");
    tour_keep(t, "src", src);
    tour_keep(t, "tgt", tgt);
    tour_keep(t, "encoder_output", enc_out);
    tour_keep(t, "decoder_output", dec_out);
    tour_keep(t, "cross_output", cross_out);
    return done(t, &m, CLI_OK);
}

int tour_002_block(tour_run *t)
{
    modules m;
    attn_encoder_layer blk;
    attn_transformer_config cfg = {.d_model = 8, .num_heads = 2, .dim_feedforward = 32, .dropout = 0.1f};
    attn_tensor *x = seed_input(t->ctx);
    if (!modules_open(&m) || !x || attn_encoder_layer_init(&blk, m.p, "", &cfg, &m.scratch) != ATTN_OK)
        return done(t, &m, CLI_ERR_DATA);
    tour_init_mha(&blk.self_attn, true, &t->rng); /* attention */
    tour_init_linear(&blk.linear1, &t->rng);      /* feed_forward.0 */
    tour_init_linear(&blk.linear2, &t->rng);      /* feed_forward.2 */
    attn_tensor *out = attn_encoder_layer_forward(t->ctx, &blk, x, NULL, NULL);
    if (!out) return done(t, &m, CLI_ERR_DATA);
    tour_print_shape(TOUR_TR(t, "Transformer层输出形状 (TransformerBlock output shape)", "Transformer层输出形状"), out);
    TOUR_SAY(t,
             "note: the tutorial calls the block in training mode, so its dropout(0.1) makes the\n"
             "output random; the tour runs it as after transformer_block.eval().\n",
             "注意：教程在训练模式下调用这一层，dropout(0.1) 会让输出每次都不同；\n"
             "这里相当于先调用了 transformer_block.eval()。\n");
    tour_keep_mha(t, "attention.", &blk.self_attn);
    tour_keep(t, "feed_forward.0.weight", blk.linear1.weight);
    tour_keep(t, "feed_forward.0.bias", blk.linear1.bias);
    tour_keep(t, "feed_forward.2.weight", blk.linear2.weight);
    tour_keep(t, "feed_forward.2.bias", blk.linear2.bias);
    tour_keep(t, "output", out);
    return done(t, &m, CLI_OK);
}

int tour_002_conv(tour_run *t)
{
    modules m;
    attn_conv_attention_layer ca;
    attn_tensor *x = seed_input(t->ctx);
    if (!modules_open(&m) || !x || attn_conv_attention_init(&ca, m.p, "", 8, 2, 3, &m.scratch) != ATTN_OK)
        return done(t, &m, CLI_ERR_DATA);
    tour_init_mha(&ca.attention, true, &t->rng);
    tour_uniform(ca.conv.weight->data, ca.conv.weight->numel, 8 * 3, &t->rng); /* fan_in = in x k */
    tour_uniform(ca.conv.bias->data, ca.conv.bias->numel, 8 * 3, &t->rng);
    attn_tensor *out = attn_conv_attention_forward(t->ctx, &ca, x, NULL, NULL);
    if (!out) return done(t, &m, CLI_ERR_DATA);
    tour_print_shape(TOUR_TR(t, "卷积注意力输出形状 (ConvAttention output shape)", "卷积注意力输出形状"), out);
    tour_keep_mha(t, "attention.", &ca.attention);
    tour_keep(t, "conv.weight", ca.conv.weight);
    tour_keep(t, "conv.bias", ca.conv.bias);
    tour_keep(t, "output", out);
    return done(t, &m, CLI_OK);
}

int tour_002_efficient(tour_run *t)
{
    modules m;
    attn_linear_attention_layer ea;
    attn_tensor *x = seed_input(t->ctx);
    if (!modules_open(&m) || !x ||
        attn_linear_attention_init(&ea, m.p, "", 8, ATTN_LINEAR_ATTENTION_EFFICIENT, &m.scratch) != ATTN_OK)
        return done(t, &m, CLI_ERR_DATA);
    attn_linear_layer *layers[3] = {&ea.to_query, &ea.to_key, &ea.to_value};
    for (int i = 0; i < 3; i++) {
        tour_init_linear(layers[i], &t->rng);
        tour_keep(t, attn_params_name(m.p, 2 * (size_t)i), layers[i]->weight);
        tour_keep(t, attn_params_name(m.p, 2 * (size_t)i + 1), layers[i]->bias);
    }
    attn_tensor *out = attn_linear_attention_forward(t->ctx, &ea, x, NULL);
    if (!out) return done(t, &m, CLI_ERR_DATA);
    tour_print_shape(TOUR_TR(t, "高效注意力输出形状 (EfficientAttention output shape)", "高效注意力输出形状"), out);
    TOUR_SAY(t, "K is softmaxed over the 4 positions, Q is not: out = Q (softmax(K)^T V), no (4, 4) matrix\n",
             "K 沿 4 个位置做 softmax，Q 不做：out = Q (softmax(K)^T V)，不产生 (4, 4) 的矩阵\n");
    tour_keep(t, "output", out);
    return done(t, &m, CLI_OK);
}
