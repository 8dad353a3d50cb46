/* Masks and lengths at the library's entry points: every array is checked against the shape it
 * applies to before it is read (a short or long valid_lens, a key_padding of another shape, a
 * shape that was never set), the two bool polarities agree (blocked = !attend), nn.MultiheadAttention's
 * 3-D (B*H, L, S) mask means the same as its 4-D reading, and layers refuse masks they cannot
 * apply. Run under ASan, a read past an array fails the suite. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    B = 2,
    H = 2,
    LQ = 3,
    LK = 4,
    D = 4
};

/* sdpa with opts on fixed q (B, H, LQ, D), k, v (B, H, LK, D): the output (or NULL) in ctx. */
static attn_tensor *run_sdpa(attn_ctx *ctx, const attn_sdpa_opts *opts)
{
    attn_tensor *q = attn_tensor_empty(ctx, 4, (int64_t[]){B, H, LQ, D});
    attn_tensor *k = attn_tensor_empty(ctx, 4, (int64_t[]){B, H, LK, D});
    attn_tensor *v = attn_tensor_empty(ctx, 4, (int64_t[]){B, H, LK, D});
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_tensor_fill_normal(q, &rng, 0, 1);
    attn_tensor_fill_normal(k, &rng, 0, 1);
    attn_tensor_fill_normal(v, &rng, 0, 1);
    return attn_sdpa(ctx, q, k, v, opts, NULL);
}

/* Copies of the lengths on the heap, sized exactly, so ASan sees any read past them. */
static void refused(attn_ctx *ctx, const char *what, attn_sdpa_opts opts, attn_status want, const char *says)
{
    attn_tensor *out = run_sdpa(ctx, &opts);
    TK_CHECK(!out && attn_last_status() == want && strstr(attn_last_error(), says),
             "%s: expected %s mentioning \"%s\", got %s: %s", what, attn_status_name(want), says,
             out ? "a result" : attn_status_name(attn_last_status()), attn_last_error());
    attn_ctx_reset(ctx);
}

static void lengths_and_padding(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    int64_t *one = malloc(1 * sizeof *one), *three = malloc(3 * sizeof *three),
            *per_query = malloc(B * LQ * sizeof *per_query);
    uint8_t *pad_long = calloc(B * (LK + 1), 1), *pad = calloc(B * LK, 1);
    one[0] = 2;
    for (int i = 0; i < 3; i++) three[i] = 2;
    for (int i = 0; i < B * LQ; i++) per_query[i] = 1 + i % LK;
    attn_sdpa_opts o = {0};
    o.mask.valid_lens = (attn_lens){one, 1, {1}};
    refused(ctx, "valid_lens (1) for B = 2", o, ATTN_ERR_SHAPE, "valid_lens has shape (1); expected (B) = (2)");
    o.mask.valid_lens = (attn_lens){three, 1, {3}};
    refused(ctx, "valid_lens (3) for B = 2", o, ATTN_ERR_SHAPE, "valid_lens has shape (3)");
    o.mask.valid_lens = (attn_lens){three, 0, {0}};
    refused(ctx, "valid_lens without a shape", o, ATTN_ERR_SHAPE, "valid_lens.ndim and .shape are not set");
    o.mask.valid_lens = (attn_lens){per_query, 2, {B, LQ + 1}};
    refused(ctx, "valid_lens (B, Lq + 1)", o, ATTN_ERR_SHAPE, "(B, Lq) = (2, 3)");
    per_query[4] = -3;
    o.mask.valid_lens = (attn_lens){per_query, 2, {B, LQ}};
    refused(ctx, "a negative length", o, ATTN_ERR_ARG, "valid_lens[4] = -3");
    per_query[4] = 2;
    TK_CHECK(run_sdpa(ctx, &o) != NULL, "valid_lens (B, Lq) that fits: %s", attn_last_error());
    attn_ctx_reset(ctx);

    refused(ctx, "an unknown impl", (attn_sdpa_opts){.impl = (attn_sdpa_impl)42}, ATTN_ERR_ARG, "impl 42");
    attn_sdpa_opts p = {0};
    p.mask.key_padding = pad_long;
    p.mask.key_padding_shape[0] = B;
    p.mask.key_padding_shape[1] = LK + 1;
    refused(ctx, "key_padding (B, Lk + 1)", p, ATTN_ERR_SHAPE,
            "key_padding has shape (2, 5); expected (B, Lk) = (2, 4)");
    p.mask.key_padding = pad;
    p.mask.key_padding_shape[0] = p.mask.key_padding_shape[1] = 0;
    refused(ctx, "key_padding without a shape", p, ATTN_ERR_SHAPE, "key_padding_shape is not set");
    attn_sdpa_opts a = {0};
    a.mask.attend = pad;
    refused(ctx, "an attend mask without a shape", a, ATTN_ERR_SHAPE, "attend_ndim and attend_shape are not set");
    a.mask.attend_ndim = 2;
    a.mask.attend_shape[0] = LK;
    a.mask.attend_shape[1] = LK;
    refused(ctx, "an attend mask (Lk, Lk)", a, ATTN_ERR_SHAPE,
            "attend mask has shape (4, 4), which does not broadcast");
    free(one);
    free(three);
    free(per_query);
    free(pad_long);
    free(pad);
    attn_ctx_free(ctx);
}

/* blocked (nn.MultiheadAttention's polarity) gives exactly what attend (SDPA's) gives on the
 * complement, alone and combined with the other masks. */
static void polarities_agree(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    uint8_t attend[LQ * LK], blocked[LQ * LK];
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    for (int i = 0; i < LQ * LK; i++) {
        attend[i] = attn_rng_uniform(&rng) < 0.6f || i % LK == 0;
        blocked[i] = !attend[i];
    }
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_sdpa_opts a = {.impl = (attn_sdpa_impl)impl}, b = a;
        a.mask.attend = attend;
        b.mask.blocked = blocked;
        a.mask.attend_ndim = b.mask.blocked_ndim = 2;
        a.mask.attend_shape[0] = b.mask.blocked_shape[0] = LQ;
        a.mask.attend_shape[1] = b.mask.blocked_shape[1] = LK;
        a.mask.causal = b.mask.causal = true;
        attn_tensor *x = run_sdpa(ctx, &a), *y = run_sdpa(ctx, &b);
        TK_CHECK(x && y && !memcmp(x->data, y->data, (size_t)x->numel * sizeof(float)),
                 "blocked = !attend gives the same output (impl %d)", impl);
        attn_ctx_reset(ctx);
    }
    attn_ctx_free(ctx);
}

/* With 3-D q, k, v (one head) a mask meets (B, Lq, Lk), the shape of q @ k^T, as
 * F.scaled_dot_product_attention broadcasts it: a (B, Lq, Lk) or (B, 1, Lk) mask means what the
 * (B, 1, Lq, Lk) or (B, 1, 1, Lk) mask of the same bytes means for 4-D inputs with H = 1 (these
 * were refused: the mask's B met H). A 4-D mask, which torch would broadcast into a 4-D output,
 * is refused. */
static void one_head_masks(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    attn_tensor *in3[3], *in4[3];
    const int64_t lens[3] = {LQ, LK, LK};
    for (int i = 0; i < 3; i++) {
        in3[i] = attn_tensor_alloc(3, (int64_t[]){B, lens[i], D});
        attn_tensor_fill_normal(in3[i], &rng, 0, 1);
        in4[i] = attn_tensor_alloc(4, (int64_t[]){B, 1, lens[i], D}); /* the same values */
        memcpy(in4[i]->data, in3[i]->data, (size_t)in3[i]->numel * sizeof(float));
    }
    float additive[B * LQ * LK];
    uint8_t attend[B * LK];
    for (int i = 0; i < B * LQ * LK; i++) additive[i] = i % LK == 1 ? -INFINITY : attn_rng_normal(&rng);
    for (int i = 0; i < B * LK; i++) attend[i] = i % LK != 2;
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_sdpa_opts o3 = {.impl = (attn_sdpa_impl)impl}, o4 = o3;
        o3.mask.additive = o4.mask.additive = additive;
        o3.mask.attend = o4.mask.attend = attend;
        o3.mask.additive_ndim = 3, o4.mask.additive_ndim = 4;
        memcpy(o3.mask.additive_shape, (int64_t[]){B, LQ, LK}, 3 * sizeof(int64_t));
        memcpy(o4.mask.additive_shape, (int64_t[]){B, 1, LQ, LK}, 4 * sizeof(int64_t));
        o3.mask.attend_ndim = 3, o4.mask.attend_ndim = 4;
        memcpy(o3.mask.attend_shape, (int64_t[]){B, 1, LK}, 3 * sizeof(int64_t));
        memcpy(o4.mask.attend_shape, (int64_t[]){B, 1, 1, LK}, 4 * sizeof(int64_t));
        attn_tensor *x = attn_sdpa(ctx, in3[0], in3[1], in3[2], &o3, NULL);
        attn_tensor *y = attn_sdpa(ctx, in4[0], in4[1], in4[2], &o4, NULL);
        TK_CHECK(x && y && x->numel == y->numel && !memcmp(x->data, y->data, (size_t)x->numel * sizeof(float)),
                 "3-D inputs, (B, Lq, Lk) and (B, 1, Lk) masks: as 4-D with H = 1 (impl %d): %s", impl,
                 attn_last_error());
        attn_tensor *z = attn_sdpa(ctx, in3[0], in3[1], in3[2], &o4, NULL); /* 4-D masks */
        TK_CHECK(!z && attn_last_status() == ATTN_ERR_SHAPE &&
                     strstr(attn_last_error(), "expected 1 to 3, broadcastable to (B, Lq, Lk) = (2, 3, 4)"),
                 "a 4-D mask on 3-D inputs is refused: %s", attn_last_error());
        attn_ctx_reset(ctx);
    }
    for (int i = 0; i < 3; i++) attn_tensor_free(in3[i]), attn_tensor_free(in4[i]);
    attn_ctx_free(ctx);
}

/* attn_mha_forward reads a 3-D (B*H, Lq, Lk) mask as PyTorch does: one (Lq, Lk) mask per batch
 * row and head, the same as the 4-D (B, H, Lq, Lk) mask of the same bytes. */
static void mha_per_head_mask(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_params *params = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_mha_layer m;
    TK_OK(attn_mha_init(&m, params, "", 8, H, 0, 0, true, 0.0f, &rng));
    attn_tensor *x = attn_tensor_empty(ctx, 3, (int64_t[]){B, LQ, 8});
    attn_tensor_fill_normal(x, &rng, 0, 1);
    uint8_t blocked[B * H * LQ * LQ];
    for (int i = 0; i < B * H * LQ * LQ; i++) blocked[i] = attn_rng_uniform(&rng) < 0.4f && i % LQ != 0;
    attn_mha_opts three = {.average_weights = false}, four = three;
    three.mask.blocked = four.mask.blocked = blocked;
    three.mask.blocked_ndim = 3;
    memcpy(three.mask.blocked_shape, (int64_t[]){B * H, LQ, LQ}, 3 * sizeof(int64_t));
    four.mask.blocked_ndim = 4;
    memcpy(four.mask.blocked_shape, (int64_t[]){B, H, LQ, LQ}, 4 * sizeof(int64_t));
    attn_tensor *a = attn_mha_forward(ctx, &m, x, x, x, &three, NULL);
    attn_tensor *b = attn_mha_forward(ctx, &m, x, x, x, &four, NULL);
    TK_CHECK(a && b && !memcmp(a->data, b->data, (size_t)a->numel * sizeof(float)),
             "a (B*H, L, S) mask equals its (B, H, L, S) reading: %s", attn_last_error());
    three.mask.blocked_shape[0] = B * H + 1;
    TK_CHECK(!attn_mha_forward(ctx, &m, x, x, x, &three, NULL) && attn_last_status() == ATTN_ERR_SHAPE,
             "a (B*H + 1, L, S) mask is refused");
    /* PyTorch refuses every other 3-D shape ("should be (B*H, L, S)"); read as attn_sdpa would,
     * a (B, L, S) or (1, L, S) mask would broadcast over the batch as if it were per head */
    for (int64_t first = 1; first <= B; first++) {
        three.mask.blocked_shape[0] = first;
        TK_CHECK(!attn_mha_forward(ctx, &m, x, x, x, &three, NULL) && attn_last_status() == ATTN_ERR_SHAPE,
                 "a (%lld, L, S) mask is refused: %s", (long long)first, attn_last_error());
    }
    attn_params_free(params);
    attn_ctx_free(ctx);
}

/* Layers refuse what they cannot apply, and check the lengths they take. */
static void layers(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_params *params = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 4);
    attn_linear_attention_layer lin;
    TK_OK(attn_linear_attention_init(&lin, params, "lin", 4, ATTN_LINEAR_ATTENTION_EFFICIENT, &rng));
    attn_tensor *x = attn_tensor_zeros(ctx, 3, (int64_t[]){B, LQ, 4});
    attn_mask causal = {.causal = true};
    TK_CHECK(!attn_linear_attention_forward(ctx, &lin, x, &causal) && attn_last_status() == ATTN_ERR_ARG,
             "linear attention refuses a causal mask: %s", attn_last_error());
    uint8_t *pad = calloc(B * (LQ - 1), 1);
    attn_mask short_pad = {.key_padding = pad, .key_padding_shape = {B, LQ - 1}};
    TK_CHECK(!attn_linear_attention_forward(ctx, &lin, x, &short_pad) && attn_last_status() == ATTN_ERR_SHAPE,
             "linear attention checks key_padding's shape: %s", attn_last_error());
    attn_additive_layer add;
    TK_OK(attn_additive_init(&add, params, "add", 4, 4, 3, 0.0f, &rng));
    int64_t *one = malloc(sizeof *one);
    one[0] = 1;
    attn_lens lens = {one, 1, {1}};
    TK_CHECK(!attn_additive_forward(ctx, &add, x, x, x, &lens, NULL) && attn_last_status() == ATTN_ERR_SHAPE,
             "additive attention checks valid_lens against B: %s", attn_last_error());
    attn_tensor *scores = attn_tensor_zeros(ctx, 3, (int64_t[]){B, LQ, LQ});
    TK_CHECK(!attn_masked_softmax(ctx, scores, &lens) && attn_last_status() == ATTN_ERR_SHAPE,
             "masked_softmax checks valid_lens against B: %s", attn_last_error());
    free(one);
    free(pad);
    attn_params_free(params);
    attn_ctx_free(ctx);
}

int main(void)
{
    lengths_and_padding();
    polarities_agree();
    one_head_masks();
    mha_per_head_mask();
    layers();
    return tk_finish("test_masks");
}
