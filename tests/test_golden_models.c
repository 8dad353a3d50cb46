/* Parity of positional encodings, Transformer layers, the GRU and the seq2seq models with PyTorch
 * 1.13, from tests/golden/model_*.safetensors (written by tests/golden/make_golden_models.py; its
 * docstring says what each tensor means):
 *   - sinusoidal: attn_sinusoidal_table (9, 6) interleaved against D2L's PositionalEncoding, and
 *     the concatenated layout against the same angles as [sin | cos] halves.
 *   - learned_pe: attn_learned_pe_forward, output and gradients of x and the table.
 *   - enc_*: attn_encoder_layer_forward against nn.TransformerEncoderLayer(16, 4, 24, dropout 0,
 *     batch_first), post-LN and pre-LN, ReLU and GELU, with a key padding mask.
 *   - dec_*: attn_decoder_layer_forward against nn.TransformerDecoderLayer with a causal tgt_mask,
 *     tgt_key_padding_mask and memory_key_padding_mask; gradients of x, memory and every parameter.
 *     *_unbatched: one sequence as torch takes it, x (L, E), memory (S, E), masks (L) and (S).
 *   - gru_*: attn_gru_forward against nn.GRU(5, 7, 2 layers, batch_first) with and without h0:
 *     outputs and h_n, gradients of loss = sum(out * g) + sum(h_n * g2) (one attn_backward).
 *   - s2s_transformer, s2s_bahdanau: attn_seq2seq_forward (teacher forcing) against the torch
 *     twins of src/models/seq2seq_{transformer,bahdanau}.c: logits and every parameter's gradient;
 *     then decoding: attn_seq2seq_decode's greedy search on the batch must give torch's greedy ids
 *     exactly (the models were trained briefly on a copy task, so rows stop at different lengths:
 *     the same lengths, the same tokens, and <eos> in torch's row where ours stops short of the
 *     limit); per sentence (batch 1, unpadded) greedy must equal its batch row for the Transformer
 *     (padding is masked everywhere; D2L's GRU encoder reads the padding, so not for Bahdanau),
 *     beam search with 1 beam (a call with cross_weights takes it) greedy's answer, and beam
 *     search with 3 beams (alpha 0 and 0.75) an answer whose length-penalised
 *     log-probability (computed here by a teacher-forced forward) is >= greedy's.
 * Every module is built with its init into an attn_params and every parameter is overwritten from
 * the file by its registered name; the registry must hold exactly the file's parameter names.
 *
 * The reference is torch run in float64 on the float32 parameters and inputs, rounded to float32
 * (see the script), so the tolerance is spent on libattn's float32 rounding alone: one side.
 * Tolerance, per tensor: |got - ref| <= rtol |ref_i| + atol max_j |ref_j| (testkit.h) for every
 * output and gradient, tk_tol_of(1, n, 4, 8) with n, the roundings on the longest path from the
 * inputs to a result (forward, backward and the weight gradients' sums), in the table per case;
 * cond 4: the sum of absolute terms within 4 times the tensor's largest value (the worst
 * cancellation seen, s2s_bahdanau's grad.decoder.rnn.weight_ih_l0[274], is 0.014 from terms of
 * total size 9.87 in a tensor whose largest value is 19.6: 0.5); 8 roundings of an element's own
 * (exp, tanh, erf, the last products) and the golden's rounding to float32. Before: 1e-5 absolute
 * + 1e-4 |ref_i| (2e-5 for s2s_transformer), which s2s_bahdanau missed on AVX-512 hosts at that
 * cancelling element: oneDNN sums in another order there (|got - ref| = 1.2e-5 = 10 u * 19.6).
 * An error of 2e-4 max|ref| in any one element fails every bound (checked every time). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bound of a case of n roundings on its longest path (the header says why) */
#define TOL(n) tk_tol_of(1, (n), 4, 8)

/* Mirrored from make_golden_models.py */
#define PE_MAX_LEN 9
#define PE_DIM 6
#define LAYER_D 16
#define LAYER_HEADS 4
#define LAYER_FFN 24
#define GRU_IN 5
#define GRU_HIDDEN 7
#define GRU_LAYERS 2
#define S2S_SRC_VOCAB 11
#define S2S_TGT_VOCAB 13
#define S2S_PAD 1
#define S2S_BOS 2
#define S2S_EOS 3
#define S2S_MAX_LEN 16
#define BEAM_WIDE 3

typedef enum {
    LEARNED_PE,
    ENCODER,
    DECODER,
    GRU,
    S2S
} model_kind;

typedef struct model_case {
    const char *name; /* tests/golden/model_<name>.safetensors */
    model_kind kind;
    bool norm_first, gelu; /* layers */
    bool h0;               /* gru */
    attn_seq2seq_kind s2s; /* seq2seq */
    int64_t d_model;       /* seq2seq */
    const char *inputs[2]; /* float inputs, differentiated */
    const char *masks[2];  /* BOOL (B, L) padding masks, true = padding */
    double n;              /* roundings on the longest path: the bound TOL(n) */
} model_case;

/* n per case (d 16, 4 heads of 4, FFN 24, B 2, L and S 5-6 for the layers):
 *   learned_pe: x + table (1), the table's gradient sums over B = 2: 4;
 *   encoder layer: forward in-projection 16, scores 4, softmax and @ v over 5, out-projection 16,
 *     2 LayerNorms 16 each, FFN 16 then 24: ~120; backward as much plus dx summing the three
 *     projections' inputs (48); weight gradients sum over B * L = 10: 300;
 *   decoder layer: self- and cross-attention, 3 LayerNorms and the FFN: ~180 forward, ~230
 *     backward, weight sums 12: 500;
 *   GRU (5 -> 7, 2 layers, 4 steps): gates over in + hidden <= 14 terms and ~5 elementwise
 *     roundings per step and layer, through 4 steps x 2 layers forward (160) and back (160),
 *     weight sums over B * T = 12: 400;
 *   s2s_transformer (2 + 2 such layers, src 7, tgt 6, B 3): ~640 forward with the embeddings, the
 *     generator (16) and the loss's softmax over 13; ~800 backward; weight sums 18: 1500;
 *   s2s_bahdanau (d 8, GRU 2 layers, src 7, tgt 6): the encoder's recurrence (7 steps x 2 layers
 *     x ~21) then the decoder's 6 steps of attention (~40: W_q, W_k, tanh, w_v, softmax and @ v
 *     over 7) and a 2-layer GRU on cat(context, embedding) (~60) and dense (8): ~960 forward, as
 *     much backward, weight sums 18: 2000.
 * TOL(2000) = 4.8e-7 |ref_i| + 8.5e-5 max|ref|; TOL(300) = 4.8e-7 |ref_i| + 3.3e-5 max|ref|. */
static const model_case cases[] = {
    {"learned_pe", LEARNED_PE, .inputs = {"x"}, .n = 4},
    {"enc_post_relu", ENCODER, .inputs = {"x"}, .masks = {"key_padding_mask"}, .n = 300},
    {"enc_post_gelu", ENCODER, .gelu = true, .inputs = {"x"}, .masks = {"key_padding_mask"}, .n = 300},
    {"enc_pre_relu", ENCODER, .norm_first = true, .inputs = {"x"}, .masks = {"key_padding_mask"}, .n = 300},
    {"enc_pre_gelu", ENCODER, .norm_first = true, .gelu = true, .inputs = {"x"}, .masks = {"key_padding_mask"},
     .n = 300},
    {"dec_post_relu", DECODER, .inputs = {"x", "memory"}, .masks = {"tgt_key_padding_mask", "memory_key_padding_mask"},
     .n = 500},
    {"dec_pre_gelu", DECODER, .norm_first = true, .gelu = true, .inputs = {"x", "memory"},
     .masks = {"tgt_key_padding_mask", "memory_key_padding_mask"}, .n = 500},
    /* unbatched, as torch takes one sequence: x (L, E), memory (S, E), masks (L) and (S) */
    {"enc_post_relu_unbatched", ENCODER, .inputs = {"x"}, .masks = {"key_padding_mask"}, .n = 300},
    {"dec_pre_gelu_unbatched", DECODER, .norm_first = true, .gelu = true, .inputs = {"x", "memory"},
     .masks = {"tgt_key_padding_mask", "memory_key_padding_mask"}, .n = 500},
    {"gru_h0", GRU, .h0 = true, .inputs = {"x", "h0"}, .n = 400},
    {"gru_noh0", GRU, .inputs = {"x"}, .n = 400},
    /* The gradient of the first encoder layer's in-projection ends the deepest path (2 decoder
     * layers with cross-attention, 2 encoder layers, generator); its entries reach 16, and a few
     * of them (~1e-4) are cancellations of much larger summands (embeddings are scaled by
     * sqrt(16) = 4): the atol term covers those, the old absolute 1e-5 did not (1.35e-5 here). */
    {"s2s_transformer", S2S, .s2s = ATTN_SEQ2SEQ_TRANSFORMER, .d_model = 16, .n = 1500},
    {"s2s_bahdanau", S2S, .s2s = ATTN_SEQ2SEQ_BAHDANAU, .d_model = 8, .n = 2000},
};

/* Seq2seq integer inputs, in this order. */
enum {
    SRC,
    SRC_LENS,
    TGT_IN,
    TGT_LENS,
    N_IDS
};
static const char *const id_names[N_IDS] = {"src", "src_lens", "tgt_in", "tgt_lens"};

/* Outputs: "out" for all, "h_n" for the GRU; each with its "grad_<name>". */
static const char *const out_names[2] = {"out", "h_n"};

typedef struct model_run {
    const model_case *c;
    attn_st_file *f;
    attn_params *params;
    attn_learned_pe pe;
    attn_encoder_layer enc;
    attn_decoder_layer dec;
    attn_gru_layer gru;
    attn_seq2seq s2s;
    bool s2s_built;
    attn_tensor *in[2];
    int n_in;
    uint8_t *mask[2];
    int64_t *ids[N_IDS];
    int64_t batch, src_len, tgt_len;
} model_run;

/* ---- loading ---- */

static uint8_t *load_mask(model_run *r, const char *name)
{
    int64_t n = 0;
    int64_t *v = attn_st_load_i64(r->f, name, &n);
    TK_CHECK(v != NULL, "%s: mask %s: %s", r->c->name, name, attn_last_error());
    uint8_t *m = v ? malloc((size_t)n) : NULL;
    for (int64_t i = 0; m && i < n; i++) m[i] = v[i] != 0;
    free(v);
    return m;
}

static bool load_ids(model_run *r)
{
    for (int i = 0; i < N_IDS; i++) {
        int64_t n = 0;
        r->ids[i] = attn_st_load_i64(r->f, id_names[i], &n);
        TK_CHECK(r->ids[i] != NULL, "%s: %s: %s", r->c->name, id_names[i], attn_last_error());
        if (!r->ids[i]) return false;
    }
    r->batch = attn_st_find(r->f, "src")->shape[0];
    r->src_len = attn_st_find(r->f, "src")->shape[1];
    r->tgt_len = attn_st_find(r->f, "tgt_in")->shape[1];
    return true;
}

static attn_status build_module(model_run *r, attn_rng *rng)
{
    const model_case *c = r->c;
    attn_transformer_config tc = {.d_model = LAYER_D,
                                  .num_heads = LAYER_HEADS,
                                  .dim_feedforward = LAYER_FFN,
                                  .dropout = 0.0f,
                                  .norm_first = c->norm_first,
                                  .gelu = c->gelu,
                                  .ffn_dropout = true};
    switch (c->kind) {
    case LEARNED_PE:
        return attn_learned_pe_init(&r->pe, r->params, "pos_encoding", PE_MAX_LEN, PE_DIM, rng);
    case ENCODER:
        return attn_encoder_layer_init(&r->enc, r->params, "", &tc, rng);
    case DECODER:
        return attn_decoder_layer_init(&r->dec, r->params, "", &tc, rng);
    case GRU:
        return attn_gru_init(&r->gru, r->params, "", GRU_IN, GRU_HIDDEN, GRU_LAYERS, 0.0f, rng);
    case S2S: {
        attn_seq2seq_config sc = {.kind = c->s2s,
                                  .src_vocab = S2S_SRC_VOCAB,
                                  .tgt_vocab = S2S_TGT_VOCAB,
                                  .d_model = c->d_model,
                                  .num_heads = LAYER_HEADS,
                                  .dim_feedforward = LAYER_FFN,
                                  .enc_layers = 2,
                                  .dec_layers = 2,
                                  .dropout = 0.0f,
                                  .max_len = S2S_MAX_LEN,
                                  .pad_id = S2S_PAD,
                                  .bos_id = S2S_BOS,
                                  .eos_id = S2S_EOS};
        r->s2s_built = true;
        return attn_seq2seq_init(&r->s2s, r->params, &sc, rng);
    }
    }
    return ATTN_ERR_ARG;
}

/* Is `name` one of the file's non-parameter tensors for this case? */
static bool is_data_name(const model_case *c, const char *name)
{
    static const char *const common[] = {"out", "grad_out", "h_n", "grad_h_n", "greedy.out", "greedy.lens"};
    if (strncmp(name, "grad.", 5) == 0) return true;
    for (size_t i = 0; i < sizeof common / sizeof *common; i++)
        if (strcmp(name, common[i]) == 0) return true;
    for (int i = 0; i < 2; i++)
        if ((c->inputs[i] && strcmp(name, c->inputs[i]) == 0) || (c->masks[i] && strcmp(name, c->masks[i]) == 0))
            return true;
    for (int i = 0; c->kind == S2S && i < N_IDS; i++)
        if (strcmp(name, id_names[i]) == 0) return true;
    return false;
}

/* Builds the module, overwrites every parameter by name, and checks the names both ways. */
static bool load_params(model_run *r)
{
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    r->params = attn_params_new();
    attn_status st = r->params ? build_module(r, &rng) : ATTN_ERR_NOMEM;
    TK_CHECK(st == ATTN_OK, "%s: init: %s", r->c->name, attn_last_error());
    if (st != ATTN_OK) return false;
    bool ok = true;
    for (size_t i = 0; i < attn_params_count(r->params); i++) {
        const char *name = attn_params_name(r->params, i);
        st = attn_st_copy_into(r->f, name, attn_params_at(r->params, i));
        TK_CHECK(st == ATTN_OK, "%s: parameter %s: %s", r->c->name, name, attn_last_error());
        ok = ok && st == ATTN_OK;
    }
    for (size_t i = 0; i < attn_st_count(r->f); i++) {
        const char *name = attn_st_at(r->f, i)->name;
        TK_CHECK(is_data_name(r->c, name) || attn_params_get(r->params, name) != NULL,
                 "%s: torch tensor %s has no twin in our registry", r->c->name, name);
    }
    return ok;
}

/* The table's layer options against the file's metadata (the script writes them). */
static void check_metadata(const model_run *r)
{
    const model_case *c = r->c;
    if (c->kind != ENCODER && c->kind != DECODER) return;
    const struct {
        const char *key;
        bool expected;
    } flags[] = {{"norm_first", c->norm_first}, {"gelu", c->gelu}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        const char *s = attn_st_metadata(r->f, flags[i].key);
        TK_CHECK(s && (strcmp(s, "1") == 0) == flags[i].expected, "%s: metadata %s = %s, table %d", c->name,
                 flags[i].key, s ? s : "(none)", flags[i].expected);
    }
}

static bool load_case(model_run *r)
{
    const model_case *c = r->c;
    check_metadata(r);
    for (r->n_in = 0; r->n_in < 2 && c->inputs[r->n_in]; r->n_in++) {
        if (!(r->in[r->n_in] = tk_golden_tensor(r->f, c->inputs[r->n_in]))) return false;
        attn_tensor_set_requires_grad(r->in[r->n_in], true);
    }
    for (int i = 0; i < 2 && c->masks[i]; i++)
        if (!(r->mask[i] = load_mask(r, c->masks[i]))) return false;
    if (c->kind == S2S && !load_ids(r)) return false;
    return load_params(r);
}

static void free_run(model_run *r)
{
    for (int i = 0; i < 2; i++) {
        attn_tensor_free(r->in[i]);
        free(r->mask[i]);
    }
    for (int i = 0; i < N_IDS; i++) free(r->ids[i]);
    if (r->s2s_built) attn_seq2seq_free(&r->s2s);
    if (r->params) attn_params_free(r->params);
    if (r->f) attn_st_close(r->f);
}

/* ---- forward, backward, comparison ---- */

/* Runs the case's forward; outs[0] = out, outs[1] = h_n (GRU) or NULL. */
static void forward(attn_ctx *ctx, model_run *r, attn_tensor **outs)
{
    outs[0] = outs[1] = NULL;
    switch (r->c->kind) {
    case LEARNED_PE:
        outs[0] = attn_learned_pe_forward(ctx, &r->pe, r->in[0]);
        break;
    case ENCODER: { /* x (B, L, E), or (L, E) unbatched: B = 1 for the masks */
        const bool one = r->in[0]->ndim == 2;
        const int64_t B = one ? 1 : r->in[0]->shape[0], L = r->in[0]->shape[one ? 0 : 1];
        attn_mask m = {.key_padding = r->mask[0], .key_padding_shape = {B, L}};
        outs[0] = attn_encoder_layer_forward(ctx, &r->enc, r->in[0], &m, NULL);
        break;
    }
    case DECODER: {
        const bool one = r->in[0]->ndim == 2;
        const int64_t B = one ? 1 : r->in[0]->shape[0], L = r->in[0]->shape[one ? 0 : 1],
                      LS = r->in[1]->shape[one ? 0 : 1];
        attn_mask self = {.causal = true, .key_padding = r->mask[0], .key_padding_shape = {B, L}};
        attn_mask cross = {.key_padding = r->mask[1], .key_padding_shape = {B, LS}};
        outs[0] = attn_decoder_layer_forward(ctx, &r->dec, r->in[0], r->in[1], &self, &cross, NULL, NULL);
        break;
    }
    case GRU:
        outs[0] = attn_gru_forward(ctx, &r->gru, r->in[0], r->c->h0 ? r->in[1] : NULL, &outs[1]);
        break;
    case S2S:
        outs[0] = attn_seq2seq_forward(ctx, &r->s2s, r->ids[SRC], r->ids[SRC_LENS], r->batch, r->src_len,
                                       r->ids[TGT_IN], r->ids[TGT_LENS], r->tgt_len, NULL);
        break;
    }
}

/* got (values and shape) against golden tensor `name`. */
static void compare(const model_run *r, const char *name, const attn_tensor *got, const float *values)
{
    attn_tensor *ref = tk_golden_tensor(r->f, name);
    if (!ref) return;
    char what[160], gs[64], rs[64];
    snprintf(what, sizeof what, "%s: %s", r->c->name, name);
    bool same = got && attn_same_shape(got, ref);
    TK_CHECK(same, "%s: shape %s, torch has %s", what, got ? attn_shape_str(got, gs, sizeof gs) : "none",
             attn_shape_str(ref, rs, sizeof rs));
    if (same && values)
        tk_close_scaled(what, values, ref->data, ref->numel, TOL(r->c->n));
    else if (same)
        TK_CHECK(false, "%s: no gradient computed", what);
    attn_tensor_free(ref);
}

/* loss = sum over outputs of sum(out * grad_<out>) with the file's upstream gradients. */
static attn_tensor *golden_loss(attn_ctx *ctx, const model_run *r, attn_tensor *const *outs)
{
    attn_tensor *loss = NULL;
    for (int i = 0; i < 2 && outs[i]; i++) {
        char name[32];
        snprintf(name, sizeof name, "grad_%s", out_names[i]);
        attn_tensor *g = attn_st_load(r->f, name, ctx);
        TK_CHECK(g && g->numel == outs[i]->numel, "%s: %s: %s", r->c->name, name,
                 g ? "size differs from the output" : attn_last_error());
        if (!g || g->numel != outs[i]->numel) return NULL;
        attn_tensor *term = attn_sum_all(ctx, attn_mul(ctx, outs[i], g));
        loss = loss ? attn_add(ctx, loss, term) : term;
    }
    return loss;
}

static void run_golden(model_run *r)
{
    const model_case *c = r->c;
    attn_ctx *ctx = attn_ctx_new(1);
    TK_NOT_NULL(ctx);
    if (!ctx) return;
    attn_tensor *outs[2];
    forward(ctx, r, outs);
    TK_CHECK(outs[0] != NULL, "%s: forward: %s", c->name, attn_last_error());
    int n_out = c->kind == GRU ? 2 : 1;
    for (int i = 0; outs[0] && i < n_out; i++) compare(r, out_names[i], outs[i], outs[i] ? outs[i]->data : NULL);
    attn_tensor *loss = outs[0] ? golden_loss(ctx, r, outs) : NULL;
    attn_status st = loss ? attn_backward(ctx, loss) : ATTN_ERR_STATE;
    TK_CHECK(st == ATTN_OK, "%s: backward: %s", c->name, attn_last_error());
    char name[160];
    for (int i = 0; st == ATTN_OK && i < r->n_in; i++) {
        snprintf(name, sizeof name, "grad.%s", c->inputs[i]);
        compare(r, name, r->in[i], r->in[i]->grad);
    }
    for (size_t i = 0; st == ATTN_OK && i < attn_params_count(r->params); i++) {
        attn_tensor *p = attn_params_at(r->params, i);
        snprintf(name, sizeof name, "grad.%s", attn_params_name(r->params, i));
        compare(r, name, p, p->grad);
    }
    attn_ctx_free(ctx);
}

/* ---- seq2seq decoding ---- */

/* log p(tokens | src) of one sentence by teacher forcing: tokens[0..n) (its <eos> included when
 * it has one) after <bos>, divided by ((5 + n) / 6)^alpha as beam search ranks them. */
static double penalized_logp(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, int64_t src_len,
                             const int64_t *tokens, int64_t n, float alpha)
{
    int64_t tgt_in[S2S_MAX_LEN];
    tgt_in[0] = S2S_BOS;
    memcpy(tgt_in + 1, tokens, (size_t)(n - 1) * sizeof *tgt_in);
    attn_ctx_reset(ctx);
    attn_ctx_set_grad_enabled(ctx, false);
    attn_tensor *logits = attn_seq2seq_forward(ctx, m, src, &src_len, 1, src_len, tgt_in, &n, n, NULL);
    attn_tensor *logp = attn_log_softmax(ctx, logits, -1);
    attn_ctx_set_grad_enabled(ctx, true);
    TK_CHECK(logp != NULL, "teacher-forced log-probabilities: %s", attn_last_error());
    if (!logp) return NAN;
    double sum = 0.0;
    for (int64_t t = 0; t < n; t++) sum += logp->data[t * S2S_TGT_VOCAB + tokens[t]];
    return sum / pow((5.0 + (double)n) / 6.0, alpha);
}

/* Tokens of an answer with its <eos> put back when it ended with one (len < max_out). */
static int64_t with_eos(int64_t *dst, const int64_t *answer, int64_t len, int64_t max_out)
{
    memcpy(dst, answer, (size_t)len * sizeof *dst);
    if (len < max_out) dst[len++] = S2S_EOS;
    return len;
}

/* Our rows out (B, W) without <eos>, then padding, against torch's rows ref (B, W), which keep
 * it: the same lengths and tokens, and torch's <eos> where ours stops short of W */
static bool same_as_torch(const int64_t *out, const int64_t *lens, const int64_t *ref, const int64_t *ref_lens,
                          int64_t B, int64_t W)
{
    bool same = memcmp(lens, ref_lens, (size_t)B * sizeof *lens) == 0;
    for (int64_t b = 0; same && b < B; b++) {
        same = memcmp(out + b * W, ref + b * W, (size_t)lens[b] * sizeof *out) == 0 &&
               (lens[b] == W || ref[b * W + lens[b]] == S2S_EOS);
        for (int64_t t = lens[b]; t < W; t++) same = same && out[b * W + t] == S2S_PAD;
    }
    return same;
}

/* Greedy on the batch against torch's ids; then per sentence (batch 1, no padding): greedy,
 * which for the Transformer must equal its batch row (padding is masked everywhere; D2L's GRU
 * encoder reads the padding, so the Bahdanau state legitimately differs), beam 1 = greedy, and
 * beam 3 scoring >= greedy. */
static void check_decoding(attn_ctx *ctx, const model_run *r, int64_t max_out, const int64_t *ref,
                           const int64_t *ref_lens, int64_t *out, int64_t *lens)
{
    const model_case *c = r->c;
    const int64_t B = r->batch, S = r->src_len;
    TK_OK(attn_seq2seq_decode(ctx, &r->s2s, r->ids[SRC], r->ids[SRC_LENS], B, S, NULL, max_out, out, lens));
    TK_CHECK(same_as_torch(out, lens, ref, ref_lens, B, max_out), "%s: greedy ids differ from torch's", c->name);
    for (int64_t b = 0; b < B; b++) {
        const int64_t *src = r->ids[SRC] + b * S, src_len = r->ids[SRC_LENS][b];
        int64_t one[S2S_MAX_LEN], one_len = -1, beam[S2S_MAX_LEN], beam_len = -1;
        int64_t seq[S2S_MAX_LEN], gseq[S2S_MAX_LEN];
        TK_OK(attn_seq2seq_decode(ctx, &r->s2s, src, &src_len, 1, src_len, NULL, max_out, one, &one_len));
        if (c->s2s == ATTN_SEQ2SEQ_TRANSFORMER)
            TK_CHECK(one_len == lens[b] && memcmp(one, out + b * max_out, (size_t)max_out * sizeof *one) == 0,
                     "%s: sentence %lld: greedy alone differs from its batch row", c->name, (long long)b);
        attn_tensor *w = NULL; /* with cross_weights, one sentence goes through beam search even at 1 beam */
        const attn_seq2seq_decode_opts beam1 = {.beam_size = 1, .length_penalty = 0.75f, .cross_weights = &w};
        TK_OK(attn_seq2seq_decode(ctx, &r->s2s, src, &src_len, 1, src_len, &beam1, max_out, beam, &beam_len));
        TK_CHECK(beam_len == one_len && memcmp(beam, one, (size_t)one_len * sizeof *beam) == 0,
                 "%s: sentence %lld: beam search with 1 beam differs from greedy", c->name, (long long)b);
        int64_t gn = with_eos(gseq, one, one_len, max_out);
        for (int a = 0; a < 2; a++) { /* no length penalty, and the usual one */
            const attn_seq2seq_decode_opts wide_beam = {.beam_size = BEAM_WIDE, .length_penalty = a ? 0.75f : 0.0f};
            const float alpha = wide_beam.length_penalty;
            TK_OK(attn_seq2seq_decode(ctx, &r->s2s, src, &src_len, 1, src_len, &wide_beam, max_out, beam, &beam_len));
            int64_t n = with_eos(seq, beam, beam_len, max_out);
            double wide = penalized_logp(ctx, &r->s2s, src, src_len, seq, n, alpha);
            double narrow = penalized_logp(ctx, &r->s2s, src, src_len, gseq, gn, alpha);
            /* 1e-6: the two scores come from different forward passes (rounding only) */
            TK_CHECK(wide >= narrow - 1e-6, "%s: sentence %lld, alpha %g: beam %d scores %.6f < greedy %.6f", c->name,
                     (long long)b, alpha, BEAM_WIDE, wide, narrow);
        }
    }
}

static void run_decoding(const model_run *r)
{
    const char *s = attn_st_metadata(r->f, "greedy_max_out");
    const int64_t max_out = s ? strtol(s, NULL, 10) : 0, B = r->batch;
    int64_t n_ref = 0, n_lens = 0;
    int64_t *ref = attn_st_load_i64(r->f, "greedy.out", &n_ref);
    int64_t *ref_lens = attn_st_load_i64(r->f, "greedy.lens", &n_lens);
    bool ok = max_out > 0 && max_out < S2S_MAX_LEN && ref && ref_lens && n_ref == B * max_out && n_lens == B;
    TK_CHECK(ok, "%s: greedy reference missing or malformed", r->c->name);
    attn_ctx *ctx = attn_ctx_new(1);
    int64_t *out = calloc((size_t)(B * max_out + 1), sizeof *out);
    int64_t *lens = calloc((size_t)B, sizeof *lens);
    TK_CHECK(ctx && out && lens, "%s: out of memory", r->c->name);
    if (ok && ctx && out && lens) check_decoding(ctx, r, max_out, ref, ref_lens, out, lens);
    free(out);
    free(lens);
    free(ref);
    free(ref_lens);
    attn_ctx_free(ctx);
}

static void run_case(const model_case *c)
{
    char file[96];
    snprintf(file, sizeof file, "model_%s", c->name);
    model_run r = {.c = c, .f = tk_golden(file)};
    if (r.f && load_case(&r)) {
        run_golden(&r);
        if (c->kind == S2S) run_decoding(&r);
    }
    free_run(&r);
}

/* ---- the sinusoidal table in both layouts ---- */

static void sinusoidal(void)
{
    static const struct {
        const char *golden;
        attn_pe_layout layout;
    } layouts[] = {{"table", ATTN_PE_INTERLEAVED}, {"table_concat", ATTN_PE_CONCATENATED}};
    attn_st_file *f = tk_golden("model_sinusoidal");
    attn_ctx *ctx = attn_ctx_new(1);
    for (size_t i = 0; f && ctx && i < sizeof layouts / sizeof *layouts; i++) {
        attn_tensor *t = attn_sinusoidal_table(ctx, PE_MAX_LEN, PE_DIM, layouts[i].layout);
        TK_NOT_NULL(t);
        /* computed in double and rounded on both sides: at most the last rounding apart */
        model_case c = {.name = "sinusoidal", .n = 1};
        model_run r = {.c = &c, .f = f};
        if (t) compare(&r, layouts[i].golden, t, t->data);
    }
    attn_ctx_free(ctx);
    if (f) attn_st_close(f);
}

/* A GRU longer than the 512 steps a fixed array once held: it runs, and its final state is its
 * last output (the same float values); ATTN_GRU_MAX_LAYERS + 1 layers are refused */
static void gru_long_and_deep(void)
{
    attn_params *p = attn_params_new();
    attn_gru_layer g;
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    TK_OK(attn_gru_init(&g, p, "gru", 3, 4, 2, 0.0f, &rng));
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *x = attn_tensor_zeros(ctx, 3, (int64_t[]){2, 600, 3}), *h_n = NULL;
    attn_tensor_fill_normal(x, &rng, 0.0f, 1.0f);
    attn_tensor *y = attn_gru_forward(ctx, &g, x, NULL, &h_n);
    bool same = y && h_n && y->shape[1] == 600;
    for (int b = 0; same && b < 2; b++) /* h_n[1, b] = y[b, 599] */
        same = !memcmp(h_n->data + (2 + b) * 4, y->data + (b * 600 + 599) * 4, 4 * sizeof(float));
    TK_CHECK(same, "a GRU over 600 steps: its final state is its last output (%s)", y ? "ran" : attn_last_error());
    attn_gru_layer deep;
    TK_CHECK(attn_gru_init(&deep, p, "deep", 3, 4, ATTN_GRU_MAX_LAYERS + 1, 0.0f, &rng) == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "1 to 8 layers"),
             "a GRU of ATTN_GRU_MAX_LAYERS + 1 layers refused (%s)", attn_last_error());
    attn_ctx_free(ctx);
    attn_params_free(p);
}

int main(void)
{
    sinusoidal();
    gru_long_and_deep();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    printf("test_golden_models: sinusoidal tables + %zu golden cases\n", sizeof cases / sizeof *cases);
    return tk_finish("test_golden_models");
}
