/* The layers and the translator over packed sequences against the same ones padded, on the same
 * parameters and inputs (dropout 0): attn_mha_forward_packed_cross against attn_mha_forward with
 * the memory's padding masked (kdim = E and kdim != E), attn_encoder_layer_forward_packed against
 * attn_encoder_layer_forward under key padding (post-LN, pre-LN with GELU, rotary positions of
 * both layouts), attn_decoder_layer_forward_packed against attn_decoder_layer_forward under causal
 * + target padding and source padding (also with rotary positions, whose setting is checked to
 * change the output), and attn_seq2seq_forward_packed against
 * attn_seq2seq_forward through the label-smoothed loss the translator trains on (sinusoidal and
 * rotary positions): outputs at the
 * real rows, the inputs' gradients there and every parameter's gradient, on 1 and 2 threads.
 * Then what is refused (bad offsets, empty or too long sequences, ids, the Bahdanau model).
 *
 * Tolerance: two float32 sides, paths of at most 2 x (TK_TOL_MHA's 160 + the FFN's 16 + 32 terms +
 * two layer norms of 16) roundings per layer, four layers deep in the translator: n 2000 bounds
 * every case (the probabilistic term, 8 sqrt(n), grows slowly), cond 4 as TK_TOL_MHA:
 * tk_tol_of(2, 2000, 4, 8). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    B = 4,
    E = 16,
    H = 4,
    FF = 32,
    VOCAB = 20
};

/* B sequences of lens[b] rows: packed at cu, padded to L */
typedef struct packing {
    int64_t lens[B], cu[B + 1], L, total;
} packing;

static packing packing_of(const int64_t lens[B])
{
    packing p = {.L = 1};
    for (int b = 0; b < B; b++) {
        p.lens[b] = lens[b], p.cu[b + 1] = p.cu[b] + lens[b];
        if (lens[b] > p.L) p.L = lens[b];
    }
    p.total = p.cu[B];
    return p;
}

/* packed row i of a (total, w) block sits at padded row b L + j */
static int64_t padded_row(const packing *p, int64_t i)
{
    int b = 0;
    while (i >= p->cu[b + 1]) b++;
    return b * p->L + (i - p->cu[b]);
}

static uint8_t *padding_mask(const packing *p) /* (B, L), 1 = padding; the caller frees it */
{
    uint8_t *m = calloc((size_t)(B * p->L), 1);
    for (int b = 0; b < B; b++)
        for (int64_t j = p->lens[b]; j < p->L; j++) m[b * p->L + j] = 1;
    return m;
}

/* A leaf input: the packed (total, w) rows, or the same rows at their padded places with finite
 * padding rows between them (B, L, w) */
static attn_tensor *input_of(const float *rows, const packing *p, int64_t w, bool packed, uint64_t seed)
{
    attn_tensor *t = packed ? attn_tensor_alloc(2, (int64_t[]){p->total, w})
                            : tk_randn(seed, 3, (int64_t[]){B, p->L, w}); /* the padding rows */
    for (int64_t i = 0; i < p->total; i++)
        memcpy(t->data + (packed ? i : padded_row(p, i)) * w, rows + i * w, sizeof(float) * (size_t)w);
    attn_tensor_set_requires_grad(t, true);
    return t;
}

/* the packed (total, w) rows of t, packed or padded */
static float *rows_of(const float *t, const packing *p, int64_t w, bool packed)
{
    float *r = malloc(sizeof(float) * (size_t)(p->total * w));
    for (int64_t i = 0; i < p->total; i++)
        memcpy(r + i * w, t + (packed ? i : padded_row(p, i)) * w, sizeof(float) * (size_t)w);
    return r;
}

/* What a case computes on one side: the output (packed (total_t, w) or padded (B, Lt, w)) */
typedef struct side_in {
    const void *layer;
    attn_tensor *x, *memory;
    const packing *pt, *ps;
    const uint8_t *pad_t, *pad_s; /* (B, Lt), (B, Ls) */
    bool packed;
} side_in;
typedef attn_tensor *(*side_fn)(attn_ctx *ctx, const side_in *in);

/* What a side gives: the output's real rows, the inputs' gradients there, every parameter's gradient */
typedef struct side_out {
    float *out, *grad_x, *grad_memory, **grad_params;
} side_out;

/* loss = sum(out * weights), weights drawn per packed row (the same on both sides), 0 at padding */
static side_out run_side(side_fn fn, side_in in, attn_params *params, int64_t w_out, int threads)
{
    side_out r = {0};
    attn_params_zero_grad(params);
    attn_ctx *ctx = attn_ctx_new(3);
    TK_OK(attn_ctx_set_num_threads(ctx, threads));
    attn_tensor *out = fn(ctx, &in);
    TK_CHECK(out != NULL, "%s forward: %s", in.packed ? "packed" : "padded", attn_last_error());
    if (!out) {
        attn_ctx_free(ctx);
        return r;
    }
    attn_tensor *w = attn_tensor_zeros(ctx, out->ndim, out->shape);
    attn_rng rng;
    attn_rng_seed(&rng, 99);
    for (int64_t i = 0; i < in.pt->total; i++)
        for (int64_t c = 0; c < w_out; c++)
            w->data[(in.packed ? i : padded_row(in.pt, i)) * w_out + c] = attn_rng_normal(&rng);
    attn_tensor *loss = attn_sum_all(ctx, attn_mul(ctx, out, w));
    TK_CHECK(loss && attn_backward(ctx, loss) == ATTN_OK, "backward: %s", attn_last_error());
    r.out = rows_of(out->data, in.pt, w_out, in.packed);
    r.grad_x = in.x->grad ? rows_of(in.x->grad, in.pt, E, in.packed) : NULL;
    r.grad_memory = in.memory && in.memory->grad
                        ? rows_of(in.memory->grad, in.ps, in.memory->shape[in.memory->ndim - 1], in.packed)
                        : NULL;
    const size_t n = attn_params_count(params);
    r.grad_params = calloc(n, sizeof(float *));
    for (size_t i = 0; i < n; i++) {
        attn_tensor *t = attn_params_at(params, i);
        r.grad_params[i] = calloc((size_t)t->numel, sizeof(float));
        if (t->grad) memcpy(r.grad_params[i], t->grad, sizeof(float) * (size_t)t->numel);
    }
    attn_ctx_free(ctx);
    return r;
}

static void side_free(side_out *r, size_t n)
{
    for (size_t i = 0; r->grad_params && i < n; i++) free(r->grad_params[i]);
    free(r->grad_params), free(r->out), free(r->grad_x), free(r->grad_memory);
}

#define TOL_PACKED tk_tol_of(2, 2000, 4, 8)

/* Both sides of one case, compared */
static void compare(const char *name, side_fn fn, const void *layer, attn_params *params, const packing *pt,
                    const packing *ps, int64_t w_x, int64_t w_memory, int64_t w_out, int threads)
{
    attn_tensor *x_rows = tk_randn(7, 2, (int64_t[]){pt->total, w_x});
    attn_tensor *m_rows = ps ? tk_randn(8, 2, (int64_t[]){ps->total, w_memory}) : NULL;
    uint8_t *pad_t = padding_mask(pt), *pad_s = ps ? padding_mask(ps) : NULL;
    side_out r[2];
    for (int packed = 0; packed < 2; packed++) {
        side_in in = {.layer = layer, .pt = pt, .ps = ps, .pad_t = pad_t, .pad_s = pad_s, .packed = packed};
        in.x = input_of(x_rows->data, pt, w_x, packed, 17);
        in.memory = ps ? input_of(m_rows->data, ps, w_memory, packed, 18) : NULL;
        r[packed] = run_side(fn, in, params, w_out, threads);
        attn_tensor_free(in.x), attn_tensor_free(in.memory);
    }
    char what[200];
    if (r[0].out && r[1].out) {
        snprintf(what, sizeof what, "%s, %d threads: packed output against padded", name, threads);
        tk_close_scaled(what, r[1].out, r[0].out, pt->total * w_out, TOL_PACKED);
        if (r[0].grad_x && r[1].grad_x) {
            snprintf(what, sizeof what, "%s, %d threads: packed grad of x against padded", name, threads);
            tk_close_scaled(what, r[1].grad_x, r[0].grad_x, pt->total * w_x, TOL_PACKED);
        }
        if (ps) {
            TK_CHECK(r[0].grad_memory && r[1].grad_memory, "%s: both memories have gradients", name);
            snprintf(what, sizeof what, "%s, %d threads: packed grad of memory against padded", name, threads);
            if (r[0].grad_memory && r[1].grad_memory)
                tk_close_scaled(what, r[1].grad_memory, r[0].grad_memory, ps->total * w_memory, TOL_PACKED);
        }
        for (size_t i = 0; i < attn_params_count(params); i++) {
            snprintf(what, sizeof what, "%s, %d threads: packed grad %s against padded", name, threads,
                     attn_params_name(params, i));
            tk_close_scaled(what, r[1].grad_params[i], r[0].grad_params[i], attn_params_at(params, i)->numel,
                            TOL_PACKED);
        }
    }
    for (int k = 0; k < 2; k++) side_free(&r[k], attn_params_count(params));
    free(pad_t), free(pad_s);
    attn_tensor_free(x_rows), attn_tensor_free(m_rows);
}

/* every parameter ~ N(0, 0.3), biases too (which init zeroes) */
static void randomize(attn_params *p, uint64_t seed)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    for (size_t i = 0; i < attn_params_count(p); i++) attn_tensor_fill_normal(attn_params_at(p, i), &rng, 0.0f, 0.3f);
}

static const int64_t LENS_T[B] = {5, 1, 3, 4}, LENS_S[B] = {7, 2, 1, 6};

/* ---- cross-attention ---- */

static attn_tensor *mha_cross(attn_ctx *ctx, const side_in *in)
{
    const attn_mha_layer *m = in->layer;
    if (in->packed) return attn_mha_forward_packed_cross(ctx, m, in->x, in->memory, in->pt->cu, in->ps->cu, B);
    attn_mha_opts o = {.mask = {.key_padding = in->pad_s, .key_padding_shape = {B, in->ps->L}}};
    return attn_mha_forward(ctx, m, in->x, in->memory, in->memory, &o, NULL);
}

static void cross_attention(int64_t kdim, int threads)
{
    attn_params *p = attn_params_new();
    attn_mha_layer m;
    TK_OK(attn_mha_init(&m, p, "mha", E, H, kdim, kdim, true, 0.0f, NULL));
    randomize(p, 21);
    const packing pt = packing_of(LENS_T), ps = packing_of(LENS_S);
    char name[64];
    snprintf(name, sizeof name, "cross-attention, kdim %lld", (long long)kdim);
    compare(name, mha_cross, &m, p, &pt, &ps, E, kdim, E, threads);
    attn_params_free(p);
}

/* ---- encoder layer ---- */

static attn_tensor *encoder(attn_ctx *ctx, const side_in *in)
{
    const attn_encoder_layer *m = in->layer;
    if (in->packed) return attn_encoder_layer_forward_packed(ctx, m, in->x, in->pt->cu, B);
    attn_mask mask = {.key_padding = in->pad_t, .key_padding_shape = {B, in->pt->L}};
    return attn_encoder_layer_forward(ctx, m, in->x, &mask, NULL);
}

static void encoder_layer(const char *name, attn_transformer_config c, int threads)
{
    attn_params *p = attn_params_new();
    attn_encoder_layer m;
    TK_OK(attn_encoder_layer_init(&m, p, "enc", &c, NULL));
    randomize(p, 22);
    const packing pt = packing_of(LENS_S);
    compare(name, encoder, &m, p, &pt, NULL, E, 0, E, threads);
    attn_params_free(p);
}

/* ---- decoder layer ---- */

static attn_tensor *decoder(attn_ctx *ctx, const side_in *in)
{
    const attn_decoder_layer *m = in->layer;
    if (in->packed) return attn_decoder_layer_forward_packed(ctx, m, in->x, in->pt->cu, in->memory, in->ps->cu, B);
    attn_mask self = {.causal = true, .key_padding = in->pad_t, .key_padding_shape = {B, in->pt->L}};
    attn_mask cross = {.key_padding = in->pad_s, .key_padding_shape = {B, in->ps->L}};
    return attn_decoder_layer_forward(ctx, m, in->x, in->memory, &self, &cross, NULL, NULL);
}

static void decoder_layer(const char *name, attn_transformer_config c, int threads)
{
    attn_params *p = attn_params_new();
    attn_decoder_layer m;
    TK_OK(attn_decoder_layer_init(&m, p, "dec", &c, NULL));
    randomize(p, 23);
    const packing pt = packing_of(LENS_T), ps = packing_of(LENS_S);
    compare(name, decoder, &m, p, &pt, &ps, E, E, E, threads);
    if (c.rope_base > 0.0f && threads == 1) { /* the setting is used: the same layer without it differs */
        attn_ctx *ctx = attn_ctx_new(1);
        attn_tensor *x = tk_randn(41, 2, (int64_t[]){pt.total, E}), *mem = tk_randn(42, 2, (int64_t[]){ps.total, E});
        attn_tensor *with = attn_decoder_layer_forward_packed(ctx, &m, x, pt.cu, mem, ps.cu, B);
        m.cfg.rope_base = 0.0f;
        attn_tensor *without = attn_decoder_layer_forward_packed(ctx, &m, x, pt.cu, mem, ps.cu, B);
        double most = 0;
        for (int64_t i = 0; with && without && i < with->numel; i++)
            most = fmax(most, fabs((double)with->data[i] - without->data[i]));
        TK_CHECK(most > 1e-2, "%s: the rotary positions change the output (by %g at most)", name, most);
        attn_tensor_free(x), attn_tensor_free(mem);
        attn_ctx_free(ctx);
    }
    attn_params_free(p);
}

/* ---- the translator's loss ---- */

static attn_seq2seq_config tiny_translator(float rope_base)
{
    return (attn_seq2seq_config){.kind = ATTN_SEQ2SEQ_TRANSFORMER,
                                 .src_vocab = VOCAB,
                                 .tgt_vocab = VOCAB,
                                 .d_model = E,
                                 .num_heads = H,
                                 .dim_feedforward = FF,
                                 .enc_layers = 2,
                                 .dec_layers = 2,
                                 .max_len = 12,
                                 .pad_id = 1,
                                 .bos_id = 2,
                                 .eos_id = 3,
                                 .rope_base = rope_base};
}

/* The translator's label-smoothed loss on the same pairs, padded (pad_id in the padding, ignored
 * by the loss) and packed: the loss and every parameter's gradient */
static void translator_loss(float rope_base, int threads)
{
    const attn_seq2seq_config c = tiny_translator(rope_base);
    attn_params *p = attn_params_new();
    attn_seq2seq m;
    TK_OK(attn_seq2seq_init(&m, p, &c, NULL));
    randomize(p, 24);
    const packing pt = packing_of(LENS_T), ps = packing_of(LENS_S);
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    int64_t src[B * 7], tgt_in[B * 5], tgt_out[B * 5], src_p[B * 7], tgt_in_p[B * 5], tgt_out_p[B * 5];
    for (int64_t i = 0; i < B * ps.L; i++) src[i] = c.pad_id;
    for (int64_t i = 0; i < B * pt.L; i++) tgt_in[i] = tgt_out[i] = c.pad_id;
    for (int64_t i = 0; i < ps.total; i++)
        src[padded_row(&ps, i)] = src_p[i] = 4 + (int64_t)attn_rng_below(&rng, VOCAB - 4);
    for (int64_t i = 0; i < pt.total; i++) {
        tgt_in[padded_row(&pt, i)] = tgt_in_p[i] = 4 + (int64_t)attn_rng_below(&rng, VOCAB - 4);
        tgt_out[padded_row(&pt, i)] = tgt_out_p[i] = 4 + (int64_t)attn_rng_below(&rng, VOCAB - 4);
    }
    const size_t n = attn_params_count(p);
    float loss[2] = {0}, **grads[2] = {calloc(n, sizeof(float *)), calloc(n, sizeof(float *))};
    for (int packed = 0; packed < 2; packed++) {
        attn_params_zero_grad(p);
        attn_ctx *ctx = attn_ctx_new(3);
        TK_OK(attn_ctx_set_num_threads(ctx, threads));
        attn_tensor *logits =
            packed
                ? attn_seq2seq_forward_packed(ctx, &m, src_p, ps.cu, tgt_in_p, pt.cu, B)
                : attn_reshape(ctx, attn_seq2seq_forward(ctx, &m, src, ps.lens, B, ps.L, tgt_in, pt.lens, pt.L, NULL),
                               2, (int64_t[]){B * pt.L, VOCAB});
        attn_tensor *l = attn_cross_entropy(ctx, logits, packed ? tgt_out_p : tgt_out, c.pad_id, 0.1f);
        TK_CHECK(l && attn_backward(ctx, l) == ATTN_OK, "translator %s: forward and backward: %s",
                 packed ? "packed" : "padded", attn_last_error());
        if (packed && logits)
            TK_CHECK(logits->ndim == 2 && logits->shape[0] == pt.total && logits->shape[1] == VOCAB,
                     "packed logits are (total_t %lld, V)", (long long)pt.total);
        loss[packed] = l ? l->data[0] : 0.0f;
        for (size_t i = 0; i < n; i++) {
            attn_tensor *t = attn_params_at(p, i);
            grads[packed][i] = calloc((size_t)t->numel, sizeof(float));
            if (t->grad) memcpy(grads[packed][i], t->grad, sizeof(float) * (size_t)t->numel);
        }
        attn_ctx_free(ctx);
    }
    char what[160];
    const char *positions = rope_base > 0.0f ? "rotary" : "sinusoidal";
    snprintf(what, sizeof what, "translator (%s), %d threads: packed loss against padded", positions, threads);
    tk_close_scaled(what, &loss[1], &loss[0], 1, TOL_PACKED);
    for (size_t i = 0; i < n; i++) {
        snprintf(what, sizeof what, "translator (%s), %d threads: packed grad %s against padded", positions, threads,
                 attn_params_name(p, i));
        tk_close_scaled(what, grads[1][i], grads[0][i], attn_params_at(p, i)->numel, TOL_PACKED);
    }
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < n; i++) free(grads[k][i]);
        free(grads[k]);
    }
    attn_seq2seq_free(&m);
    attn_params_free(p);
}

/* ---- refusals ---- */

static void refusals(void)
{
    attn_seq2seq_config c = tiny_translator(0.0f);
    attn_params *p = attn_params_new();
    attn_seq2seq m;
    TK_OK(attn_seq2seq_init(&m, p, &c, NULL));
    attn_ctx *ctx = attn_ctx_new(1);
    int64_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 5;
    const int64_t good[B + 1] = {0, 2, 4, 6, 8};
    const struct {
        const char *what;
        int64_t cu_src[B + 1], cu_tgt[B + 1];
        const char *message;
    } bad[] = {
        {"a source offset list not starting at 0", {1, 2, 4, 6, 8}, {0, 2, 4, 6, 8}, "cu_src[0] = 1"},
        {"decreasing target offsets", {0, 2, 4, 6, 8}, {0, 2, 1, 6, 8}, "non-decreasing"},
        {"an empty source sequence", {0, 2, 2, 6, 8}, {0, 2, 4, 6, 8}, "sequence 1 of cu_src has 0 tokens"},
        {"a target sequence past max_len", {0, 2, 4, 6, 8}, {0, 2, 4, 6, 19}, "has 13 tokens; expected 1 to 12"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_tensor *y = attn_seq2seq_forward_packed(ctx, &m, ids, bad[i].cu_src, ids, bad[i].cu_tgt, B);
        TK_CHECK(!y && strstr(attn_last_error(), bad[i].message), "packed translator: %s refused (%s)", bad[i].what,
                 attn_last_error());
    }
    ids[3] = VOCAB;
    TK_CHECK(!attn_seq2seq_forward_packed(ctx, &m, ids, good, ids + 10, good, B) &&
                 strstr(attn_last_error(), "source id 20 at 3"),
             "packed translator: a source id past the vocabulary refused (%s)", attn_last_error());
    ids[3] = 5;
    TK_CHECK(!attn_seq2seq_forward_packed(ctx, &m, ids, good, ids, good, 0), "packed translator: batch 0 refused");
    attn_seq2seq_free(&m);
    attn_params_free(p);

    c.rope_base = 0.5f;
    p = attn_params_new();
    TK_CHECK(attn_seq2seq_init(&m, p, &c, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "rope_base 0.5"),
             "a translator with rope base 0.5 refused (%s)", attn_last_error());
    c.kind = ATTN_SEQ2SEQ_BAHDANAU, c.rope_base = 10000.0f;
    TK_CHECK(attn_seq2seq_init(&m, p, &c, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "rope_base"),
             "a Bahdanau model with rotary positions refused (%s)", attn_last_error());
    TK_CHECK(attn_params_count(p) == 0, "nothing registered by the refused inits");
    c.rope_base = 0.0f;
    TK_OK(attn_seq2seq_init(&m, p, &c, NULL));
    TK_CHECK(!attn_seq2seq_forward_packed(ctx, &m, ids, good, ids, good, B) && strstr(attn_last_error(), "Bahdanau"),
             "packed Bahdanau refused (%s)", attn_last_error());
    attn_seq2seq_free(&m);
    attn_params_free(p);

    p = attn_params_new();
    attn_mha_layer mha;
    TK_OK(attn_mha_init(&mha, p, "mha", E, H, 0, 0, true, 0.0f, NULL));
    attn_tensor *q = attn_tensor_zeros(ctx, 2, (int64_t[]){8, E}), *mem = attn_tensor_zeros(ctx, 2, (int64_t[]){6, E});
    TK_CHECK(!attn_mha_forward_packed_cross(ctx, &mha, q, mem, good, good, B) &&
                 strstr(attn_last_error(), "cu_seqlens_k[4] = 8; expected memory's 6 rows"),
             "packed cross-attention: offsets past the memory's rows refused (%s)", attn_last_error());
    attn_tensor *wide = attn_tensor_zeros(ctx, 2, (int64_t[]){6, E + 1});
    TK_CHECK(!attn_mha_forward_packed_cross(ctx, &mha, q, wide, good, (int64_t[]){0, 1, 2, 3, 6}, B) &&
                 strstr(attn_last_error(), "mha_packed_cross: query (8, 16), memory (6, 17)"),
             "packed cross-attention: a memory of the wrong width refused (%s)", attn_last_error());
    TK_CHECK(!attn_mha_forward_packed_cross(ctx, &mha, q, mem, good, NULL, B) && strstr(attn_last_error(), "NULL"),
             "packed cross-attention: NULL offsets refused (%s)", attn_last_error());
    attn_ctx_free(ctx);
    attn_params_free(p);
}

int main(void)
{
    const attn_transformer_config post = {.d_model = E, .num_heads = H, .dim_feedforward = FF, .ffn_dropout = true};
    attn_transformer_config pre = post, rope_pairs = post, rope_halves = post;
    pre.norm_first = true, pre.gelu = true;
    rope_pairs.rope_base = 10000.0f, rope_pairs.rope_layout = ATTN_ROPE_INTERLEAVED;
    rope_halves.rope_base = 500.0f, rope_halves.rope_layout = ATTN_ROPE_HALVES, rope_halves.rope_dim = 2;
    for (int threads = 1; threads <= 2; threads++) {
        cross_attention(E, threads);
        cross_attention(12, threads);
        encoder_layer("encoder layer, post-LN", post, threads);
        encoder_layer("encoder layer, pre-LN with GELU", pre, threads);
        encoder_layer("encoder layer, rotary positions (interleaved pairs)", rope_pairs, threads);
        encoder_layer("encoder layer, rotary positions (halves, 2 of 4 dims)", rope_halves, threads);
        decoder_layer("decoder layer, post-LN", post, threads);
        decoder_layer("decoder layer, pre-LN with GELU", pre, threads);
        decoder_layer("decoder layer, rotary positions (halves, 2 of 4 dims)", rope_halves, threads);
        translator_loss(0.0f, threads);
        translator_loss(10000.0f, threads);
    }
    refusals();
    return tk_finish("test_packed_layers");
}
