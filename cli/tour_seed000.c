/* attn tour, seed 000 (注意力机制): its one listing, ScaledDotProductAttention(d_k=64) on
 * Q, K, V ~ N(0, 1) of shape (2, 10, 64), computed the way the listing writes it, step by step,
 * then with the decoder mask its "关键细节" describes (future positions set to -inf). */
#include "tour.h"

#include <math.h>
#include <stdio.h>

/* The listing's forward: softmax(Q K^T / sqrt(d_k) [masked_fill(mask == 0, -inf)]) V. */
static attn_tensor *listing_forward(attn_ctx *ctx, attn_tensor *q, attn_tensor *k, attn_tensor *v,
                                    const float *additive_mask, attn_tensor **weights)
{
    const int64_t d_k = q->shape[2];
    attn_tensor *scores = attn_scale(ctx, attn_matmul(ctx, q, k, false, true), 1.0f / sqrtf((float)d_k));
    if (additive_mask && scores) {
        int64_t shape[2] = {q->shape[1], k->shape[1]};
        scores = attn_add(ctx, scores, attn_tensor_from(ctx, 2, shape, additive_mask));
    }
    *weights = attn_softmax(ctx, scores, -1);
    return attn_matmul(ctx, *weights, v, false, false);
}

/* The top-left 4 x 4 of a matrix with cols columns. */
static void print_corner(const float *m, int64_t cols)
{
    float corner[16];
    for (int i = 0; i < 16; i++) corner[i] = m[(i / 4) * cols + i % 4];
    tour_print_matrix(corner, 4, 4, NULL, NULL);
}

int tour_000_demo(tour_run *t)
{
    enum {
        B = 2,
        L = 10,
        D = 64
    };
    attn_ctx *ctx = t->ctx;
    const int64_t shape[3] = {B, L, D};
    attn_tensor *q = attn_tensor_empty(ctx, 3, shape), *k = attn_tensor_empty(ctx, 3, shape),
                *v = attn_tensor_empty(ctx, 3, shape);
    if (!q || !k || !v) return tour_fail(t);
    attn_tensor_fill_normal(q, &t->rng, 0, 1); /* Q = torch.randn(batch_size, seq_len, d_k) */
    attn_tensor_fill_normal(k, &t->rng, 0, 1);
    attn_tensor_fill_normal(v, &t->rng, 0, 1);
    attn_tensor *weights, *masked_weights;
    attn_tensor *out = listing_forward(ctx, q, k, v, NULL, &weights);
    float causal[L * L]; /* torch.tril(torch.ones(L, L)), 0 -> -inf */
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) causal[i * L + j] = j <= i ? 0.0f : -INFINITY;
    attn_tensor *masked_out = listing_forward(ctx, q, k, v, causal, &masked_weights);
    if (!out || !masked_out) return tour_fail(t);
    tour_print_shape(TOUR_TR(t, "输出形状 (output shape)", "输出形状"), out);
    tour_print_shape(TOUR_TR(t, "注意力权重形状 (attention weights shape)", "注意力权重形状"), weights);
    printf("weights[0, :4, :4]:\n");
    print_corner(weights->data, L);
    TOUR_SAY(t, "with the decoder mask (position i sees keys j <= i), weights[0, :4, :4]:\n",
             "加上解码器掩码（位置 i 只看得到 j <= i 的键）后，weights[0, :4, :4]：\n");
    print_corner(masked_weights->data, L);
    tour_keep(t, "Q", q);
    tour_keep(t, "K", k);
    tour_keep(t, "V", v);
    tour_keep(t, "output", out);
    tour_keep(t, "attn_weights", weights);
    tour_keep(t, "masked_output", masked_out);
    tour_keep(t, "masked_attn_weights", masked_weights);
    return CLI_OK;
}
