/* attn op: one forward function per mechanism, plus the shared plumbing of op_io.h. */
#include "op_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- inputs ---- */

/* NaN or Inf in an input, a parameter or grad_out is refused with the tensor's name and the
 * element's index (PyTorch would propagate it silently into every output). */
bool op_check_finite(const attn_tensor *t, const char *name)
{
    if (attn_tensor_check_finite(t, name) == ATTN_OK) return true;
    fprintf(stderr, "attn op: %s\n", attn_last_error());
    attn_clear_error(); /* printed here */
    return false;
}

/* An input or grad_out of an integer or bool dtype is refused, as PyTorch refuses to take its
 * gradient (attn_st_load would convert it to float). */
static bool float_in_file(const op_run *run, const char *name)
{
    const attn_st_tensor *t = attn_st_find(run->file, name);
    if (!t || op_float_dtype(t->dtype)) return true; /* a missing one is reported by the load */
    fprintf(stderr, "attn op: tensor \"%s\" is %s; expected F32, F64, F16 or BF16 (it takes gradients)\n", name,
            attn_dtype_name(t->dtype));
    return false;
}

/* Input `name` as a float tensor with requires_grad (NULL + message if missing). */
static attn_tensor *input(op_run *run, const char *name, const char *grad_name)
{
    if (!float_in_file(run, name)) return NULL;
    attn_tensor *t = attn_st_view(run->file, name, run->ctx); /* the file's bytes: read once */
    if (!t || run->n_inputs == 3 || !op_check_finite(t, name)) return NULL;
    attn_tensor_set_requires_grad(t, true);
    run->inputs[run->n_inputs] = t;
    run->input_grad_names[run->n_inputs++] = grad_name;
    return t;
}

/* The first of two input names present: linear and conv_attention accept x or q. */
static attn_tensor *input_x(op_run *run)
{
    return input(run, attn_st_find(run->file, "x") ? "x" : "q", "dx");
}

/* ---- parameters ---- */

static bool has(const op_run *run, const char *prefix, const char *name)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return attn_st_find(run->file, full) != NULL;
}

/* Copies rows [row0, row0 + rows) of dst from tensor `name` (seed naming alias), which must be
 * (rows, width) for a 2-D dst, (rows) for a 1-D one. */
static attn_status copy_rows(const op_run *run, attn_tensor *dst, int64_t row0, int64_t rows, const char *prefix,
                             const char *name)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    attn_tensor *src = attn_st_load(run->file, full, NULL);
    if (!src) return attn_last_status();
    int64_t width = dst->ndim == 2 ? dst->shape[1] : 1;
    attn_status st = ATTN_OK;
    if (!op_check_finite(src, full))
        st = ATTN_ERR_NUMERIC;
    else if (src->ndim != dst->ndim || src->shape[0] != rows || (dst->ndim == 2 && src->shape[1] != width) ||
             (row0 + rows) * width > dst->numel) {
        char a[64];
        if (dst->ndim == 2)
            fprintf(stderr, "attn op: %s has shape %s, expected (%lld, %lld)\n", full, attn_shape_str(src, a, 64),
                    (long long)rows, (long long)width);
        else
            fprintf(stderr, "attn op: %s has shape %s, expected (%lld)\n", full, attn_shape_str(src, a, 64),
                    (long long)rows);
        st = ATTN_ERR_SHAPE;
    } else
        memcpy(dst->data + row0 * width, src->data, (size_t)src->numel * sizeof(float));
    attn_tensor_free(src);
    return st;
}

/* Seed 002's MultiHeadAttention names its layers Wq, Wk, Wv, fc_out: the same math as
 * nn.MultiheadAttention. Fill in_proj_* and out_proj.* from them. */
static attn_status load_seed_mha(op_run *run, const char *prefix, const attn_mha_layer *m)
{
    const char *w[3] = {"Wq.weight", "Wk.weight", "Wv.weight"};
    const char *b[3] = {"Wq.bias", "Wk.bias", "Wv.bias"};
    attn_status st;           /* copy_rows' status itself: its messages are printed, not kept */
    if (!m->in_proj_weight) { /* kdim or vdim differ from E: separate q/k/v projections */
        fprintf(stderr,
                "attn op: seed 002's names (%sWq.weight, ...) need q, k and v of one width E; "
                "use q_proj_weight, k_proj_weight, v_proj_weight otherwise\n",
                prefix);
        return ATTN_ERR_SHAPE;
    }
    for (int i = 0; i < 3; i++) {
        if ((st = copy_rows(run, m->in_proj_weight, i * m->embed_dim, m->embed_dim, prefix, w[i])) != ATTN_OK)
            return st;
        if (m->in_proj_bias &&
            (st = copy_rows(run, m->in_proj_bias, i * m->embed_dim, m->embed_dim, prefix, b[i])) != ATTN_OK)
            return st;
    }
    if ((st = copy_rows(run, m->out_proj.weight, 0, m->embed_dim, prefix, "fc_out.weight")) != ATTN_OK) return st;
    return m->out_proj.bias ? copy_rows(run, m->out_proj.bias, 0, m->embed_dim, prefix, "fc_out.bias") : ATTN_OK;
}

/* Every registered parameter from the file by name (attn_params_load_file checks shapes and
 * finite values; the file also holds the inputs, so the load is not strict); those under an MHA
 * prefix that uses seed 002's names come from load_seed_mha. */
static attn_status load_params(op_run *run, const char *seed_prefix)
{
    const size_t n = attn_params_count(run->params);
    bool *loaded = calloc(n ? n : 1, sizeof *loaded); /* (n) the file had it */
    if (!loaded) return attn_set_error(ATTN_ERR_NOMEM, "out of memory");
    attn_status st = attn_params_load_file(run->params, run->file, NULL, false, loaded);
    for (size_t i = 0; st == ATTN_OK && i < n; i++) {
        const char *name = attn_params_name(run->params, i);
        if (loaded[i] || (seed_prefix && !strncmp(name, seed_prefix, strlen(seed_prefix)))) continue;
        fprintf(stderr, "attn op: parameter \"%s\" is missing from the input file\n", name);
        st = ATTN_ERR_FORMAT;
    }
    free(loaded);
    return st;
}

/* --num-heads against the width the inputs give (E of q or x). */
static bool heads_fit(const op_run *run, int64_t E, const char *input)
{
    if (E >= 1 && E % run->args->num_heads == 0) return true;
    fprintf(stderr, "attn op %s: --num-heads %ld does not divide the width E = %lld of %s\n", run->args->name,
            run->args->num_heads, (long long)E, input);
    return false;
}

/* The key/value heads of the MHA under prefix: grouped-query attention (attn_mha_init_gqa)
 * when the file's k_proj_weight has fewer rows than E, each head E / H of them; else H.
 * 0 with a message when its rows are not a whole number of heads dividing H. */
static int64_t mha_kv_heads(const op_run *run, const char *prefix, int64_t E)
{
    char full[256];
    snprintf(full, sizeof full, "%sk_proj_weight", prefix);
    const attn_st_tensor *k = attn_st_find(run->file, full);
    const int64_t H = run->args->num_heads, head = E / H;
    if (!k || k->ndim != 2 || k->shape[0] == E) return H; /* a wrong shape is reported by the load */
    const int64_t kv = k->shape[0] / head;
    if (k->shape[0] >= 1 && k->shape[0] % head == 0 && H % kv == 0) return kv;
    fprintf(stderr,
            "attn op %s: %s has %lld rows; expected E = %lld, or for grouped-query attention a "
            "number of key/value heads dividing --num-heads %lld, each E / H = %lld rows\n",
            run->args->name, full, (long long)k->shape[0], (long long)E, (long long)H, (long long)head);
    return 0;
}

/* Builds an MHA under prefix ("" or "attention."), sized from the file, and loads it. */
static attn_status mha_from_file(op_run *run, attn_mha_layer *m, const char *prefix, int64_t E, int64_t kdim,
                                 int64_t vdim, attn_rng *rng, bool *seed_names)
{
    *seed_names =
        !has(run, prefix, "in_proj_weight") && !has(run, prefix, "q_proj_weight") && has(run, prefix, "Wq.weight");
    bool bias = has(run, prefix, *seed_names ? "Wq.bias" : "in_proj_bias");
    char pfx[128];
    snprintf(pfx, sizeof pfx, "%.*s", (int)(strlen(prefix) ? strlen(prefix) - 1 : 0), prefix);
    if (!heads_fit(run, E, "q")) return ATTN_ERR_SHAPE;
    const int64_t kv_heads = *seed_names ? run->args->num_heads : mha_kv_heads(run, prefix, E);
    if (!kv_heads) return ATTN_ERR_SHAPE;
    return attn_mha_init_gqa(m, run->params, pfx, E, run->args->num_heads, kv_heads, kdim, vdim, bias, 0.0f, rng);
}

/* ---- mechanisms ---- */

/* The attention features of the command line into opts: --window, --softcap, and ALiBi's slopes,
 * the paper's for `heads` query heads (--alibi) or the file's alibi_slopes ((H) or (B, H)); *slopes
 * holds what opts points to (NULL: none; the caller frees it). false with a message. */
static bool features(op_run *run, int64_t heads, attn_score_features *f, attn_tensor **slopes)
{
    const op_args *a = run->args;
    *slopes = NULL;
    const attn_st_tensor *t = attn_st_find(run->file, "alibi_slopes");
    if (t && a->features.alibi) {
        fprintf(stderr, "attn op %s: --alibi and a tensor alibi_slopes in the input: give one\n", a->name);
        attn_clear_error(); /* said here */
        return false;
    }
    if (t && !op_float_dtype(t->dtype)) {
        fprintf(stderr, "attn op %s: tensor \"alibi_slopes\" is %s; expected F32, F64, F16 or BF16\n", a->name,
                attn_dtype_name(t->dtype));
        return false;
    }
    if (a->features.alibi)
        *slopes = attn_tensor_alloc(1, &heads);
    else if (t)
        *slopes = attn_st_load(run->file, "alibi_slopes", NULL);
    if ((t || a->features.alibi) && !*slopes) return false;
    if (!cli_features_apply(&a->features, *slopes ? (*slopes)->data : NULL, heads, f)) {
        attn_tensor_free(*slopes);
        *slopes = NULL;
        return false;
    }
    if (t) {
        f->alibi_slopes = (*slopes)->data, f->alibi_ndim = (*slopes)->ndim;
        for (int i = 0; i < (*slopes)->ndim && i < 2; i++) f->alibi_shape[i] = (*slopes)->shape[i];
    }
    return true;
}

static attn_tensor *fwd_sdpa(op_run *run, attn_tensor **weights)
{
    const op_args *a = run->args;
    attn_tensor *q = input(run, "q", "dq"), *k = input(run, "k", "dk"), *v = input(run, "v", "dv");
    if (!q || !k || !v) return NULL;
    attn_sdpa_opts opts = {
        .scale = a->scale, .mask = run->mask, .impl = (attn_sdpa_impl)a->impl, .enable_gqa = a->enable_gqa};
    attn_tensor *slopes;
    const int64_t heads = q->ndim == 4 || op_varlen_in(run) ? q->shape[1] : 1; /* (B, H, L, D), (total, H, D) */
    if (!features(run, heads, &opts.features, &slopes)) return NULL;
    if (op_varlen_in(run)) {
        attn_tensor *out = op_sdpa_varlen(run, q, k, v, &opts, weights); /* rotary positions per sequence there */
        attn_tensor_free(slopes);
        return out;
    }
    attn_rope_opts ro; /* positions along L: (B, H, L, D) or (B, L, D) */
    if (op_rope(a, q->ndim == 4 ? 2 : 1, &ro) &&
        (!(q = attn_rope(run->ctx, q, &ro)) || !(k = attn_rope(run->ctx, k, &ro)))) {
        attn_tensor_free(slopes);
        return NULL;
    }
    attn_tensor *out = attn_sdpa(run->ctx, q, k, v, &opts, weights);
    attn_tensor_free(slopes);
    return out;
}

/* (L, B, E) <-> (B, L, E) unless --batch-first; unbatched (L, E) as it is */
static attn_tensor *seq_first(op_run *run, attn_tensor *x)
{
    return run->args->batch_first || x->ndim != 3 ? x : attn_transpose(run->ctx, x, 0, 1);
}

static attn_tensor *fwd_mha(op_run *run, attn_tensor **weights)
{
    attn_tensor *q = input(run, "q", "dq"), *k = input(run, "k", "dk"), *v = input(run, "v", "dv");
    if (!q || !k || !v) return NULL;
    const int nd = q->ndim;
    if ((nd != 2 && nd != 3) || k->ndim != nd || v->ndim != nd) {
        fprintf(stderr, "attn op: mha expects q, k, v all 3-D ((L,B,E), or (B,L,E) with --batch-first) "
                        "or all 2-D (unbatched: (L,E))\n");
        return NULL;
    }
    const attn_st_tensor *kpm = attn_st_find(run->file, "key_padding_mask");
    if (kpm && kpm->ndim == 1 && nd == 3) {
        fprintf(stderr,
                "attn op mha: key_padding_mask (%lld) is for unbatched (L,E) inputs; with 3-D q, k, "
                "v it is (B, Lk)\n",
                (long long)kpm->shape[0]);
        return NULL;
    }
    attn_mha_layer m;
    bool seed_names;
    if (mha_from_file(run, &m, "", q->shape[nd - 1], k->shape[nd - 1], v->shape[nd - 1], &run->rng, &seed_names) !=
            ATTN_OK ||
        (seed_names && load_seed_mha(run, "", &m) != ATTN_OK) || load_params(run, seed_names ? "" : NULL) != ATTN_OK)
        return NULL;
    attn_score_features feat = {0};
    attn_tensor *slopes;
    if (!features(run, m.num_heads, &feat, &slopes)) return NULL;
    attn_rope_opts ro;
    attn_mha_opts opts = {.mask = run->mask,
                          .average_weights = !run->args->per_head_weights,
                          .impl = (attn_sdpa_impl)run->args->impl,
                          .features = &feat,
                          .rope = op_rope(run->args, 0, &ro) ? &ro : NULL}; /* the layer's own positions */
    attn_tensor *out =
        attn_mha_forward(run->ctx, &m, seq_first(run, q), seq_first(run, k), seq_first(run, v), &opts, weights);
    attn_tensor_free(slopes);
    return out ? seq_first(run, out) : NULL;
}

/* The input file's tensor `name` of ndim dims, whose shape sizes mech's layer; NULL with a message
 * naming the shape expected when it is missing or of another rank */
static const attn_st_tensor *sizing_tensor(const op_run *run, const char *name, int ndim, const char *shape)
{
    const attn_st_tensor *t = attn_st_find(run->file, name);
    if (t && t->ndim == ndim) return t;
    fprintf(stderr, "attn op: %s needs %s %s\n", run->mech->name, name, shape);
    return NULL;
}

static attn_tensor *fwd_additive(op_run *run, attn_tensor **weights)
{
    attn_tensor *q = input(run, "q", "dq"), *k = input(run, "k", "dk"), *v = input(run, "v", "dv");
    if (!q || !k || !v) return NULL;
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3) {
        char a[64], b[64], c[64];
        fprintf(stderr,
                "attn op: additive expects q (B, Lq, q_size), k (B, Lk, k_size), v (B, Lk, v); got "
                "%s, %s, %s\n",
                attn_shape_str(q, a, 64), attn_shape_str(k, b, 64), attn_shape_str(v, c, 64));
        return NULL;
    }
    const attn_st_tensor *wq = sizing_tensor(run, "W_q.weight", 2, "(h, query_size)");
    if (!wq) return NULL;
    attn_additive_layer m;
    if (attn_additive_init(&m, run->params, "", q->shape[q->ndim - 1], k->shape[k->ndim - 1], wq->shape[0], 0.0f,
                           &run->rng) != ATTN_OK ||
        load_params(run, NULL) != ATTN_OK)
        return NULL;
    return attn_additive_forward(run->ctx, &m, q, k, v, &run->mask.valid_lens, weights);
}

static attn_tensor *fwd_nw(op_run *run, attn_tensor **weights)
{
    attn_tensor *q = input(run, "q", "dq"), *k = input(run, "k", "dk"), *v = input(run, "v", "dv");
    if (!q || !k || !v) return NULL;
    attn_tensor *w = NULL;
    const attn_st_tensor *ws = attn_st_find(run->file, "w");
    if (ws) { /* the learnable width, shape () as in seed 003, or (1) */
        if (ws->ndim > 1 || ws->numel != 1) {
            fprintf(stderr, "attn op: nw's w must have one element, got %lld\n", (long long)ws->numel);
            return NULL;
        }
        if (!(w = attn_params_add(run->params, "w", ws->ndim, ws->shape)) || load_params(run, NULL) != ATTN_OK)
            return NULL;
    }
    return attn_nw_forward(run->ctx, w, q, k, v, weights);
}

static attn_tensor *fwd_linear(op_run *run, attn_tensor **weights)
{
    if (weights) *weights = NULL; /* NULL unless --need-weights */
    attn_tensor *x = input_x(run);
    if (!x || x->ndim != 3) {
        if (x) fprintf(stderr, "attn op: linear expects x (B, L, E)\n");
        return NULL;
    }
    attn_linear_attention_layer m;
    if (attn_linear_attention_init(&m, run->params, "", x->shape[2],
                                   run->args->shen ? ATTN_LINEAR_ATTENTION_SHEN : ATTN_LINEAR_ATTENTION_EFFICIENT,
                                   &run->rng) != ATTN_OK ||
        load_params(run, NULL) != ATTN_OK)
        return NULL;
    return attn_linear_attention_forward(run->ctx, &m, x, &run->mask);
}

static attn_tensor *fwd_conv_attention(op_run *run, attn_tensor **weights)
{
    attn_tensor *x = input_x(run);
    if (!x || x->ndim != 3) {
        if (x) fprintf(stderr, "attn op: conv_attention expects x (B, L, E)\n");
        return NULL;
    }
    const attn_st_tensor *cw = sizing_tensor(run, "conv.weight", 3, "(E, E, k)");
    if (!cw) return NULL;
    attn_conv_attention_layer m;
    bool seed_names =
        !attn_st_find(run->file, "attention.in_proj_weight") && attn_st_find(run->file, "attention.Wq.weight");
    if (!heads_fit(run, x->shape[2], "x")) return NULL;
    if (attn_conv_attention_init(&m, run->params, "", x->shape[2], run->args->num_heads, cw->shape[2], &run->rng) !=
            ATTN_OK ||
        (seed_names && load_seed_mha(run, "attention.", &m.attention) != ATTN_OK) ||
        load_params(run, seed_names ? "attention." : NULL) != ATTN_OK)
        return NULL;
    attn_mha_opts opts = {
        .mask = run->mask, .average_weights = !run->args->per_head_weights, .impl = (attn_sdpa_impl)run->args->impl};
    return attn_conv_attention_forward(run->ctx, &m, x, &opts, weights);
}

#define OP_ALL_MASKS (OP_ATTN_MASK | OP_KEY_PADDING | OP_VALID_LENS | OP_CAUSAL)
static const op_mechanism mechanisms[] = {
    {"sdpa", fwd_sdpa, OP_ALL_MASKS, OP_SDPA_POLARITY},
    {"mha", fwd_mha, OP_ALL_MASKS, OP_MHA_POLARITY},
    {"additive", fwd_additive, OP_VALID_LENS, OP_SDPA_POLARITY},
    {"nw", fwd_nw, 0, OP_SDPA_POLARITY},
    {"linear", fwd_linear, OP_KEY_PADDING, OP_SDPA_POLARITY},
    {"conv_attention", fwd_conv_attention, OP_ALL_MASKS, OP_MHA_POLARITY},
};

const op_mechanism *op_find(const char *name)
{
    for (size_t i = 0; i < sizeof mechanisms / sizeof mechanisms[0]; i++)
        if (!strcmp(mechanisms[i].name, name)) return &mechanisms[i];
    return NULL;
}

/* ---- running and writing ---- */

static int write_grads(op_run *run)
{
    for (int i = 0; i < run->n_inputs; i++) {
        attn_tensor *t = run->inputs[i];
        if (t->grad && attn_st_writer_add_ref(run->writer, run->input_grad_names[i], ATTN_DTYPE_F32, t->ndim, t->shape,
                                              t->grad) != ATTN_OK)
            return CLI_ERR_DATA;
    }
    for (size_t i = 0; i < attn_params_count(run->params); i++) {
        attn_tensor *p = attn_params_at(run->params, i);
        char name[300];
        snprintf(name, sizeof name, "grad.%s", attn_params_name(run->params, i));
        if (p->grad && attn_st_writer_add_ref(run->writer, name, ATTN_DTYPE_F32, p->ndim, p->shape, p->grad) != ATTN_OK)
            return CLI_ERR_DATA;
    }
    return CLI_OK;
}

int op_execute(op_run *run, const op_mechanism *mech)
{
    if (op_load_masks(run, mech) != ATTN_OK) {
        if (attn_last_status() != ATTN_OK) fprintf(stderr, "attn op %s: %s\n", mech->name, attn_last_error());
        return CLI_ERR_DATA;
    }
    attn_tensor *weights = NULL;
    attn_tensor *out = mech->forward(run, run->args->need_weights ? &weights : NULL);
    if (!out) {
        if (attn_last_status() != ATTN_OK) fprintf(stderr, "attn op %s: %s\n", mech->name, attn_last_error());
        return CLI_ERR_DATA;
    }
    if (attn_st_writer_add_ref(run->writer, "out", ATTN_DTYPE_F32, out->ndim, out->shape, out->data) != ATTN_OK ||
        (weights && attn_st_writer_add_ref(run->writer, "weights", ATTN_DTYPE_F32, weights->ndim, weights->shape,
                                           weights->data) != ATTN_OK))
        return cli_fail(CLI_ERR_DATA, "op", "%s", attn_last_error());
    attn_tensor *g = NULL;
    if (!float_in_file(run, "grad_out")) return CLI_ERR_DATA;
    if (attn_st_find(run->file, "grad_out") && !(g = attn_st_view(run->file, "grad_out", run->ctx)))
        return cli_fail(CLI_ERR_DATA, "op", "%s", attn_last_error());
    if (g && !op_check_finite(g, "grad_out")) return CLI_ERR_DATA;
    if (!g) return CLI_OK; /* the inputs are the file's bytes (attn_st_view): it stays open */
    if (!attn_same_shape(g, out)) {
        char a[64], b[64];
        return cli_fail(CLI_ERR_DATA, "op", "grad_out has shape %s, expected out's shape %s", attn_shape_str(g, a, 64),
                        attn_shape_str(out, b, 64));
    }
    if (attn_backward_from(run->ctx, out, g->data) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "op", "%s", attn_last_error());
    if (write_grads(run) != CLI_OK) return cli_fail(CLI_ERR_DATA, "op", "%s", attn_last_error());
    return CLI_OK;
}

void op_run_free(op_run *run)
{
    for (int i = 0; i < 4; i++) free(run->mask_storage[i]);
    attn_st_writer_free(run->writer);
    attn_params_free(run->params);
    attn_ctx_free(run->ctx);
    attn_st_close(run->file);
}
