/* attn tour, seed 003's later sections with D2L's examples: the Bahdanau decoder's shapes, the
 * sinusoidal positional encoding (its table, the binary analogy, a heatmap and four columns as
 * curves), and the Transformer's pieces: position-wise FFN, Add & Norm, an encoder block and a
 * decoder block whose self-attention is masked. */
#include "tour.h"

#include <stdio.h>

int tour_003_bahdanau(tour_run *t)
{
    enum {
        B = 4,
        T = 7
    };
    attn_seq2seq_config cfg = {.kind = ATTN_SEQ2SEQ_BAHDANAU,
                               .src_vocab = 10,
                               .tgt_vocab = 10,
                               .d_model = 16,
                               .enc_layers = 2,
                               .dec_layers = 2,
                               .max_len = T,
                               .pad_id = 1,
                               .bos_id = 2,
                               .eos_id = 3};
    attn_params *p = attn_params_new();
    attn_seq2seq m;
    bool ready = p && attn_seq2seq_init(&m, p, &cfg, &t->rng) == ATTN_OK;
    int64_t ids[B * T] = {0}, lens[B] = {T, T, T, T}; /* X = torch.zeros((4, 7), dtype=torch.long) */
    attn_tensor *h_n = NULL, *enc = NULL, *logits = NULL, *cross = NULL;
    if (ready) {
        attn_tensor *e = attn_embedding_forward(t->ctx, &m.src_embedding, ids, 2, (int64_t[]){B, T});
        enc = attn_gru_forward(t->ctx, &m.enc_rnn, e, NULL, &h_n);
        logits = attn_seq2seq_forward(t->ctx, &m, ids, lens, B, T, ids, lens, T, &cross);
    }
    int code = enc && logits ? CLI_OK : tour_fail(t);
    if (code == CLI_OK) {
        printf("Seq2SeqEncoder + Seq2SeqAttentionDecoder(vocab_size=10, num_hiddens=16, num_layers=2)\n");
        TOUR_SAY(t, "(D2L embeds in 8 dimensions; attn's Bahdanau model uses one size, 16, for both)\n",
                 "（D2L 的嵌入是 8 维；attn 的 Bahdanau 模型嵌入和隐状态都用 16 维）\n");
        tour_print_shape(TOUR_TR(t, "encoder outputs: the keys and values h_1..h_7", "编码器输出：键和值 h_1..h_7"),
                         enc);
        tour_print_shape(TOUR_TR(t, "encoder hidden state: the first query s_0", "编码器隐状态：第一个查询 s_0"), h_n);
        tour_print_shape(TOUR_TR(t, "decoder output", "解码器输出"), logits);
        tour_print_shape(TOUR_TR(t, "attention weights (batch, 1, decoder steps, encoder steps)",
                                 "注意力权重（batch, 1, 解码步, 编码步）"),
                         cross);
        TOUR_SAY(t, "the trained model: attn translate train --model bahdanau\n",
                 "在真实数据上训练：attn translate train --model bahdanau\n");
        tour_keep(t, "encoder_outputs", enc);
        tour_keep(t, "encoder_state", h_n);
        tour_keep(t, "decoder_output", logits);
        tour_keep(t, "attention_weights", cross);
        for (size_t i = 0; i < attn_params_count(p); i++) tour_keep(t, attn_params_name(p, i), attn_params_at(p, i));
    }
    if (ready) attn_seq2seq_free(&m);
    attn_params_free(p);
    return code;
}

int tour_003_positional(tour_run *t)
{
    enum {
        STEPS = 60,
        DIM = 32
    };
    attn_tensor *pe = attn_sinusoidal_table(t->ctx, STEPS, DIM, ATTN_PE_INTERLEAVED);
    if (!pe) return tour_fail(t);
    tour_print_shape("P = PositionalEncoding(32).P[:, :60, :]", pe);
    TOUR_SAY(t, "P[:4, 6:10] (columns 6 to 9):\n", "P[:4, 6:10]（第 6 到 9 列）：\n");
    float corner[16];
    for (int i = 0; i < 16; i++) corner[i] = pe->data[(i / 4) * DIM + 6 + i % 4];
    tour_print_matrix(corner, 4, 4, NULL, NULL);
    for (int i = 0; i < 8; i++) printf("%d的二进制是：%d%d%d\n", i, i >> 2 & 1, i >> 1 & 1, i & 1);
    TOUR_SAY(t, "(the lowest bit flips fastest, as the first columns of P oscillate fastest)\n",
             "（最低位翻转得最快，正如 P 的前几列振荡得最快）\n");
    tour_keep(t, "P", pe);
    float pos[STEPS], cols[4][STEPS];
    attn_series s[4];
    static const char *const labels[4] = {"Col 6", "Col 7", "Col 8", "Col 9"};
    for (int i = 0; i < STEPS; i++) pos[i] = (float)i;
    for (int c = 0; c < 4; c++) {
        for (int i = 0; i < STEPS; i++) cols[c][i] = pe->data[i * DIM + 6 + c];
        s[c] = (attn_series){.label = labels[c], .x = pos, .y = cols[c], .n = STEPS};
    }
    attn_lineplot_opts po = {.xlabel = "Row (position)", .width = 640, .height = 300};
    int code = tour_lines(t, "003_pe_curves.png", s, 4, &po);
    attn_heatmap_opts ho = {
        .xlabel = "Column (encoding dimension)", .ylabel = "Row (position)", .auto_range = true, .annotate = -1};
    return code == CLI_OK ? tour_heatmap(t, "003_pe_heatmap.png", pe->data, STEPS, DIM, &ho) : code;
}

/* ---- Transformer ---- */

static attn_tensor *ones(attn_ctx *ctx, int64_t b, int64_t l, int64_t d)
{
    attn_tensor *x = attn_tensor_empty(ctx, 3, (int64_t[]){b, l, d});
    for (int64_t i = 0; x && i < x->numel; i++) x->data[i] = 1.0f;
    return x;
}

/* PositionWiseFFN(4, 8): dense2(relu(dense1(X))), dense1 4 -> 4, dense2 4 -> 8, on ones (2, 3, 4). */
static int ffn_and_add_norm(tour_run *t, attn_params *p, attn_rng *scratch)
{
    attn_linear_layer d1, d2;
    attn_layer_norm_layer ln;
    if (attn_linear_init(&d1, p, "ffn.dense1", 4, 4, true, scratch) != ATTN_OK ||
        attn_linear_init(&d2, p, "ffn.dense2", 4, 8, true, scratch) != ATTN_OK ||
        attn_layer_norm_init(&ln, p, "addnorm.ln", 4, 1e-5f) != ATTN_OK)
        return tour_fail(t);
    tour_init_linear(&d1, &t->rng);
    tour_init_linear(&d2, &t->rng);
    attn_tensor *x = ones(t->ctx, 2, 3, 4);
    attn_tensor *y = attn_linear_forward(t->ctx, &d2, attn_relu(t->ctx, attn_linear_forward(t->ctx, &d1, x)));
    attn_tensor *an = attn_layer_norm_forward(t->ctx, &ln, attn_add(t->ctx, x, x)); /* AddNorm(X, X) */
    if (!y || !an) return tour_fail(t);
    tour_print_shape("ffn(torch.ones((2, 3, 4)))", y);
    TOUR_SAY(t, "ffn(torch.ones((2, 3, 4)))[0]: every position gets the same 8 numbers\n",
             "ffn(torch.ones((2, 3, 4)))[0]：每个位置得到相同的 8 个数\n");
    tour_print_matrix(y->data, 3, 8, NULL, NULL);
    tour_print_shape("add_norm(torch.ones((2, 3, 4)), torch.ones((2, 3, 4)))", an);
    tour_keep(t, "ffn.dense1.weight", d1.weight);
    tour_keep(t, "ffn.dense1.bias", d1.bias);
    tour_keep(t, "ffn.dense2.weight", d2.weight);
    tour_keep(t, "ffn.dense2.bias", d2.bias);
    tour_keep(t, "ffn_output", y);
    tour_keep(t, "add_norm_output", an);
    return CLI_OK;
}

/* D2L's blocks: attention without biases (W_q, W_k, W_v, W_o), FFN with them, post-LN. */
static void init_block(tour_run *t, attn_mha_layer *const *mha, int n_mha, attn_linear_layer *l1, attn_linear_layer *l2)
{
    for (int i = 0; i < n_mha; i++) tour_init_mha(mha[i], false, &t->rng);
    tour_init_linear(l1, &t->rng);
    tour_init_linear(l2, &t->rng);
}

int tour_003_transformer(tour_run *t)
{
    enum {
        B = 2,
        L = 100,
        E = 24
    };
    attn_params *p = attn_params_new();
    attn_rng scratch;
    attn_rng_seed(&scratch, 1);
    int code = p ? ffn_and_add_norm(t, p, &scratch) : tour_fail(t);
    attn_transformer_config cfg = {.d_model = E, .num_heads = 8, .dim_feedforward = 48, .dropout = 0.5f};
    attn_encoder_layer enc;
    attn_decoder_layer dec;
    if (code == CLI_OK && (attn_encoder_layer_init(&enc, p, "encoder_blk", &cfg, &scratch) != ATTN_OK ||
                           attn_decoder_layer_init(&dec, p, "decoder_blk", &cfg, &scratch) != ATTN_OK))
        code = tour_fail(t);
    if (code != CLI_OK) {
        attn_params_free(p);
        return code;
    }
    init_block(t, (attn_mha_layer *const[]){&enc.self_attn}, 1, &enc.linear1, &enc.linear2);
    init_block(t, (attn_mha_layer *const[]){&dec.self_attn, &dec.multihead_attn}, 2, &dec.linear1, &dec.linear2);
    static const int64_t lens[B] = {3, 2};
    attn_tensor *mask = attn_tensor_empty(t->ctx, 1, (int64_t[]){B * L}), *x = ones(t->ctx, B, L, E);
    attn_tensor *enc_out = NULL, *dec_out = NULL, *self_w = NULL;
    if (mask && x) {
        tour_lens_mask(mask->data, lens, B, L);
        attn_mask padding = {.additive = mask->data, .additive_ndim = 4, .additive_shape = {B, 1, 1, L}};
        attn_mask causal = {.causal = true};
        enc_out = attn_encoder_layer_forward(t->ctx, &enc, x, &padding, NULL);
        dec_out = attn_decoder_layer_forward(t->ctx, &dec, x, enc_out, &causal, &padding, &self_w, NULL);
    }
    if (!dec_out) code = tour_fail(t);
    if (code == CLI_OK) {
        printf("X = torch.ones((2, 100, 24)), valid_lens = [3, 2], eval()\n");
        tour_print_shape("TransformerEncoderBlock(24, 48, 8, 0.5)(X, valid_lens)", enc_out);
        tour_print_shape("TransformerDecoderBlock(24, 48, 8, 0.5, 0)(X, state)", dec_out);
        TOUR_SAY(t, "its masked self-attention, head 1 of batch 0, positions 0-4: position i sees 0..i\n",
                 "它的掩蔽自注意力，批次 0 的第 1 个头，位置 0-4：位置 i 只看得到 0..i\n");
        float corner[25];
        for (int i = 0; i < 25; i++) corner[i] = self_w->data[(i / 5) * L + i % 5];
        tour_print_matrix(corner, 5, 5, NULL, NULL);
        tour_keep(t, "encoder_output", enc_out);
        tour_keep(t, "decoder_output", dec_out);
    }
    attn_params_free(p);
    return code;
}
