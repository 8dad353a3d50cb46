/* attn_rope: rotary position embeddings against the layouts' own reference code (GPT-NeoX's
 * rotate_half and GPT-J's rotate_every_two, in float64: tests/golden/make_golden_features.py's
 * feat_rope_*: (B, H, L, D), (B, L, H, D), partial rotation, a packed batch with per-token
 * positions, positions up to 123456), output and gradient; finite differences; the relative
 * property (scores of rotated q and k depend on p_q - p_k alone); and every refusal.
 * Tolerance: each output element is one rotation (two products and a sum) of float32 inputs by
 * a float32 cos and sin rounded once from float64: a few roundings of |a| + |b|, so
 * tk_tol_of(1, 4, 2, 4) of the tensor's largest (cond 2: |a| + |b| against max |x|). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void against_golden(void)
{
    static const char *const cases[] = {"rope_neox", "rope_gptj", "rope_partial", "rope_packed", "rope_far"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char file[64];
        snprintf(file, sizeof file, "feat_%s", cases[c]);
        attn_st_file *f = tk_golden(file);
        if (!f) continue;
        const char *layout = attn_st_metadata(f, "layout");
        attn_rope_opts o = {
            .layout = layout && !strcmp(layout, "halves") ? ATTN_ROPE_HALVES : ATTN_ROPE_INTERLEAVED,
            .base = strtof(attn_st_metadata(f, "base") ? attn_st_metadata(f, "base") : "0", NULL),
            .rotary_dim = strtol(attn_st_metadata(f, "rotary_dim") ? attn_st_metadata(f, "rotary_dim") : "0", NULL, 10),
            .position_dim =
                (int)strtol(attn_st_metadata(f, "position_dim") ? attn_st_metadata(f, "position_dim") : "0", NULL, 10)};
        attn_tensor *x = tk_golden_tensor(f, "x"), *g = tk_golden_tensor(f, "grad_out");
        int64_t n_positions = 0, *positions = attn_st_load_i64(f, "positions", &n_positions);
        TK_CHECK(positions != NULL, "%s: positions readable: %s", cases[c], attn_last_error());
        o.positions = positions, o.n_positions = n_positions;
        attn_ctx *ctx = attn_ctx_new(1);
        if (x && g) {
            attn_tensor_set_requires_grad(x, true);
            attn_tensor *y = attn_rope(ctx, x, &o);
            TK_CHECK(y && attn_backward_from(ctx, y, g->data) == ATTN_OK, "%s: forward and backward: %s", cases[c],
                     attn_last_error());
            attn_tensor *out = tk_golden_tensor(f, "out"), *gx = tk_golden_tensor(f, "grad.x");
            char what[96];
            snprintf(what, sizeof what, "%s: out", cases[c]);
            if (y && out) tk_close_scaled(what, y->data, out->data, out->numel, tk_tol_of(1, 4, 2, 4));
            snprintf(what, sizeof what, "%s: grad.x", cases[c]);
            if (y && gx && x->grad) tk_close_scaled(what, x->grad, gx->data, gx->numel, tk_tol_of(1, 4, 2, 4));
            attn_tensor_free(out), attn_tensor_free(gx);
        }
        attn_ctx_free(ctx);
        attn_tensor_free(x), attn_tensor_free(g);
        free(positions);
        attn_st_close(f);
    }
}

typedef struct fd_user {
    attn_rope_opts opts;
} fd_user;

static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_rope(ctx, in[0], &((fd_user *)user)->opts);
}

/* The point of rotary embeddings: q_m . k_n depends on m - n alone. q at positions 3 and 10, k at
 * 0 and 7: the two dot products agree. */
static void relative(void)
{
    for (int layout = ATTN_ROPE_INTERLEAVED; layout <= ATTN_ROPE_HALVES; layout++) {
        attn_tensor *v = tk_randn(5, 2, (int64_t[]){2, 16}), *w = tk_randn(6, 2, (int64_t[]){2, 16});
        attn_ctx *ctx = attn_ctx_new(1);
        attn_ctx_set_grad_enabled(ctx, false);
        /* rows 0 and 1 of v and w hold the same vectors: v's rows the q, w's the k */
        memcpy(v->data + 16, v->data, 16 * sizeof(float));
        memcpy(w->data + 16, w->data, 16 * sizeof(float));
        int64_t pq[2] = {3, 10}, pk[2] = {0, 7};
        attn_rope_opts oq = {(attn_rope_layout)layout, 10000.0f, 0, 0, pq, 2},
                       ok = {(attn_rope_layout)layout, 10000.0f, 0, 0, pk, 2};
        attn_tensor *q = attn_rope(ctx, v, &oq), *k = attn_rope(ctx, w, &ok);
        double d0 = 0.0, d1 = 0.0, mag = 0.0;
        for (int i = 0; q && k && i < 16; i++) {
            d0 += (double)q->data[i] * k->data[i], d1 += (double)q->data[16 + i] * k->data[16 + i];
            mag += fabs((double)q->data[i] * k->data[i]);
        }
        TK_CHECK(q && k && fabs(d0 - d1) <= 1e-5 * mag, "%s: q_3 . k_0 = %.7g equals q_10 . k_7 = %.7g",
                 layout == ATTN_ROPE_HALVES ? "halves" : "interleaved", d0, d1);
        attn_ctx_free(ctx);
        attn_tensor_free(v), attn_tensor_free(w);
    }
}

static void gradchecks_and_refusals(void)
{
    for (int layout = ATTN_ROPE_INTERLEAVED; layout <= ATTN_ROPE_HALVES; layout++) {
        int64_t pos[5] = {2, 0, 9, 4, 1};
        fd_user u = {{(attn_rope_layout)layout, 100.0f, 6, 1, pos, 5}};
        attn_tensor *in[1] = {tk_randn(7, 4, (int64_t[]){2, 5, 3, 10})};
        tk_gradcheck(layout == ATTN_ROPE_HALVES ? "rope halves, rotary_dim 6 of 10"
                                                : "rope interleaved, rotary_dim 6 of 10",
                     fd_forward, in, 1, &u, 1e-2f, 1e-3f, 1e-2f);
        attn_tensor_free(in[0]);
    }
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *x = attn_tensor_zeros(ctx, 3, (int64_t[]){2, 4, 8});
    int64_t neg[4] = {0, 1, -1, 2};
    const struct {
        const char *what;
        attn_rope_opts o;
        attn_status want;
    } bad[] = {
        {"an odd rotary_dim", {ATTN_ROPE_HALVES, 10000.0f, 7, 1, NULL, 0}, ATTN_ERR_ARG},
        {"rotary_dim past d", {ATTN_ROPE_HALVES, 10000.0f, 10, 1, NULL, 0}, ATTN_ERR_ARG},
        {"base 1", {ATTN_ROPE_HALVES, 1.0f, 0, 1, NULL, 0}, ATTN_ERR_ARG},
        {"base NaN", {ATTN_ROPE_HALVES, NAN, 0, 1, NULL, 0}, ATTN_ERR_ARG},
        {"a layout outside the enum", {(attn_rope_layout)5, 10000.0f, 0, 1, NULL, 0}, ATTN_ERR_ARG},
        {"the position dim as the last", {ATTN_ROPE_HALVES, 10000.0f, 0, 2, NULL, 0}, ATTN_ERR_SHAPE},
        {"3 positions for 4", {ATTN_ROPE_HALVES, 10000.0f, 0, 1, neg, 3}, ATTN_ERR_SHAPE},
        {"a negative position", {ATTN_ROPE_HALVES, 10000.0f, 0, 1, neg, 4}, ATTN_ERR_ARG},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        attn_clear_error();
        TK_CHECK(!attn_rope(ctx, x, &bad[i].o) && attn_last_status() == bad[i].want &&
                     strstr(attn_last_error(), "rope"),
                 "%s refused (%s)", bad[i].what, attn_last_error());
    }
    attn_ctx_free(ctx);
}

int main(void)
{
    against_golden();
    relative();
    gradchecks_and_refusals();
    return tk_finish("test_ops_rope");
}
