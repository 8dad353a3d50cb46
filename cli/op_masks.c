/* attn op: masks and lengths from the input file, and the rotary positions of the options. Each
 * mechanism says which masks it takes and whose conventions its bool attn_mask follows (op_io.h);
 * dtypes are those that PyTorch API accepts, and the shapes are checked by the library against
 * the tensors they apply to. */
#include "op_io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --rope-layout's names in cmd_op.c's order */
static const attn_rope_layout rope_layout_of[] = {ATTN_ROPE_HALVES, ATTN_ROPE_INTERLEAVED};

bool op_rope(const op_args *a, int position_dim, attn_rope_opts *out)
{
    if (a->rope_base <= 0.0f) return false;
    *out = (attn_rope_opts){.layout = rope_layout_of[a->rope_layout],
                            .base = a->rope_base,
                            .rotary_dim = a->rope_dim,
                            .position_dim = position_dim};
    return true;
}

bool op_float_dtype(attn_dtype t)
{
    return t == ATTN_DTYPE_F32 || t == ATTN_DTYPE_F64 || t == ATTN_DTYPE_F16 || t == ATTN_DTYPE_BF16;
}

static bool is_integer(attn_dtype t)
{
    return t == ATTN_DTYPE_I64 || t == ATTN_DTYPE_I32 || t == ATTN_DTYPE_I16 || t == ATTN_DTYPE_I8 ||
           t == ATTN_DTYPE_U8;
}

/* A malloc'd copy of a BOOL tensor's bytes in run->mask_storage[slot]. */
static const uint8_t *bool_bytes(op_run *run, int slot, const attn_st_tensor *t)
{
    uint8_t *p = malloc(t->nbytes ? t->nbytes : 1);
    if (!p) return NULL;
    memcpy(p, t->data, t->nbytes);
    run->mask_storage[slot] = p;
    return p;
}

/* A float tensor's values as a malloc'd float array (the caller owns it). */
static float *float_values(const op_run *run, const char *name)
{
    attn_tensor *t = attn_st_load(run->file, name, NULL);
    if (!t) return NULL;
    float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
    if (v) memcpy(v, t->data, (size_t)t->numel * sizeof *v);
    attn_tensor_free(t);
    return v;
}

/* The shape a (4 dims) and b (4 dims) broadcast to, into out4; false when they do not. */
static bool broadcast4(int64_t out4[4], const int64_t a4[4], const int64_t b4[4])
{
    for (int d = 0; d < 4; d++) { /* as PyTorch: a size of 1 takes the other size, 0 included */
        if (a4[d] != b4[d] && a4[d] != 1 && b4[d] != 1) return false;
        out4[d] = a4[d] == 1 ? b4[d] : a4[d];
    }
    return true;
}

/* sum (out4) = a (a4) + b (b4) broadcast: PyTorch adds a float key_padding_mask (B, 1, 1, Lk) to
 * a float attn_mask. Malloc'd; NULL when out of memory. */
static float *add_broadcast(const float *a, const int64_t a4[4], const float *b, const int64_t b4[4],
                            const int64_t out4[4])
{
    int64_t n = 1;
    for (int d = 0; d < 4; d++)
        if (__builtin_mul_overflow(n, out4[d], &n) || n > (int64_t)(SIZE_MAX / sizeof(float))) return NULL;
    float *sum = malloc((size_t)(n ? n : 1) * sizeof *sum);
    if (!sum) return NULL;
    int64_t i[4];
    for (i[0] = 0; i[0] < out4[0]; i[0]++)
        for (i[1] = 0; i[1] < out4[1]; i[1]++)
            for (i[2] = 0; i[2] < out4[2]; i[2]++)
                for (i[3] = 0; i[3] < out4[3]; i[3]++) {
                    int64_t ia = 0, ib = 0, io = 0;
                    for (int d = 0; d < 4; d++) {
                        ia = ia * a4[d] + (a4[d] == 1 ? 0 : i[d]);
                        ib = ib * b4[d] + (b4[d] == 1 ? 0 : i[d]);
                        io = io * out4[d] + i[d];
                    }
                    sum[io] = a[ia] + b[ib];
                }
    return sum;
}

/* "(2, 3)" of a shape into buf. */
static const char *dims(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

static void right_align4(int64_t out[4], int ndim, const int64_t *shape)
{
    for (int d = 0; d < 4; d++) out[d] = d - (4 - ndim) >= 0 ? shape[d - (4 - ndim)] : 1;
}

/* attn_mask: bool -> attend (SDPA) or blocked (MHA); float -> additive. */
static attn_status load_attn_mask(op_run *run, const op_mechanism *mech, const attn_st_tensor *t)
{
    attn_mask *m = &run->mask;
    const bool sdpa = mech->mask_api == OP_SDPA_POLARITY;
    if (t->ndim < 1 || t->ndim > 4) {
        fprintf(stderr, "attn op %s: attn_mask has %d dims; expected 1 to 4\n", mech->name, t->ndim);
        return ATTN_ERR_SHAPE;
    }
    /* torch 1.13's nn.MultiheadAttention still reads a U8 attn_mask as bool (deprecated) */
    if (t->dtype == ATTN_DTYPE_BOOL || (!sdpa && t->dtype == ATTN_DTYPE_U8)) {
        if (t->dtype == ATTN_DTYPE_U8)
            fprintf(stderr,
                    "attn op %s: note: attn_mask is U8, read as BOOL as nn.MultiheadAttention "
                    "does (deprecated there: store it as BOOL)\n",
                    mech->name);
        const uint8_t *bytes = bool_bytes(run, 0, t);
        if (!bytes) return ATTN_ERR_NOMEM;
        int *ndim = sdpa ? &m->attend_ndim : &m->blocked_ndim;
        int64_t *shape = sdpa ? m->attend_shape : m->blocked_shape;
        *(sdpa ? &m->attend : &m->blocked) = bytes;
        *ndim = t->ndim;
        memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
        return ATTN_OK;
    }
    if (!op_float_dtype(t->dtype)) {
        fprintf(stderr,
                "attn op %s: attn_mask is %s; %s takes a BOOL mask (true = %s)%s or a float "
                "mask (added to the scores)\n",
                mech->name, attn_dtype_name(t->dtype),
                sdpa ? "F.scaled_dot_product_attention" : "nn.MultiheadAttention",
                sdpa ? "may attend" : "not allowed to attend", sdpa ? "" : ", a U8 one read as BOOL");
        return ATTN_ERR_FORMAT;
    }
    float *v = float_values(run, "attn_mask");
    if (!v) return attn_last_status();
    run->mask_storage[2] = v;
    m->additive = v;
    m->additive_ndim = t->ndim;
    memcpy(m->additive_shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
    return ATTN_OK;
}

/* key_padding_mask (B, Lk), or (Lk) for nn.MultiheadAttention's unbatched inputs (a batch of
 * one): bool, true = padding; nn.MultiheadAttention also adds a float one. */
static attn_status load_key_padding(op_run *run, const op_mechanism *mech, const attn_st_tensor *t)
{
    attn_mask *m = &run->mask;
    const bool mha = mech->mask_api == OP_MHA_POLARITY;
    if (!(t->ndim == 2 || (mha && t->ndim == 1)) ||
        (t->dtype != ATTN_DTYPE_BOOL && !(mha && op_float_dtype(t->dtype)))) {
        fprintf(stderr,
                "attn op %s: key_padding_mask is %s with %d dims; expected %s (B, Lk)%s, true "
                "= padding\n",
                mech->name, attn_dtype_name(t->dtype), t->ndim,
                mha ? "BOOL or a float dtype (added to the scores)" : "BOOL", mha ? " or (Lk) (unbatched)" : "");
        return ATTN_ERR_FORMAT;
    }
    const int64_t batch = t->ndim == 2 ? t->shape[0] : 1, lk = t->shape[t->ndim - 1];
    if (t->dtype == ATTN_DTYPE_BOOL) {
        if (!(m->key_padding = bool_bytes(run, 1, t))) return ATTN_ERR_NOMEM;
        m->key_padding_shape[0] = batch;
        m->key_padding_shape[1] = lk;
        return ATTN_OK;
    }
    float *v = float_values(run, "key_padding_mask"); /* as an additive (B, 1, 1, Lk) mask */
    if (!v) return attn_last_status();
    const int64_t kpm4[4] = {batch, 1, 1, lk};
    if (!m->additive) {
        run->mask_storage[2] = v;
        m->additive = v;
        m->additive_ndim = 4;
        memcpy(m->additive_shape, kpm4, sizeof kpm4);
        return ATTN_OK;
    }
    int64_t mask4[4], sum4[4], heads = run->args->num_heads, rows;
    if (m->additive_ndim == 3 && heads > 0 && !__builtin_mul_overflow(batch, heads, &rows) &&
        m->additive_shape[0] == rows) {
        /* nn.MultiheadAttention's (B*H, Lq, Lk): one mask per batch row and head */
        const int64_t per_head[4] = {batch, heads, m->additive_shape[1], m->additive_shape[2]};
        memcpy(mask4, per_head, sizeof mask4);
    } else {
        right_align4(mask4, m->additive_ndim, m->additive_shape);
    }
    if (!broadcast4(sum4, mask4, kpm4)) {
        free(v);
        char a[96], b[96];
        fprintf(stderr,
                "attn op %s: a float attn_mask %s and a float key_padding_mask (B, Lk) = %s "
                "do not broadcast together\n",
                mech->name, dims(a, sizeof a, m->additive_ndim, m->additive_shape),
                dims(b, sizeof b, t->ndim, t->shape));
        return ATTN_ERR_SHAPE;
    }
    float *sum = add_broadcast(m->additive, mask4, v, kpm4, sum4);
    free(v);
    if (!sum) return ATTN_ERR_NOMEM;
    free(run->mask_storage[2]);
    run->mask_storage[2] = sum;
    m->additive = sum;
    m->additive_ndim = 4;
    memcpy(m->additive_shape, sum4, sizeof sum4);
    return ATTN_OK;
}

/* valid_lens: an integer tensor (B) or (B, Lq), as D2L passes it. */
static attn_status load_valid_lens(op_run *run, const op_mechanism *mech, const attn_st_tensor *t)
{
    if (!is_integer(t->dtype) || t->ndim < 1 || t->ndim > 2) {
        fprintf(stderr,
                "attn op %s: valid_lens is %s with %d dims; expected an integer dtype (I64, "
                "I32, ...) of shape (B) or (B, Lq)\n",
                mech->name, attn_dtype_name(t->dtype), t->ndim);
        return ATTN_ERR_FORMAT;
    }
    int64_t n;
    int64_t *lens = attn_st_load_i64(run->file, "valid_lens", &n);
    if (!lens) return attn_last_status();
    run->mask_storage[3] = lens;
    run->mask.valid_lens =
        (attn_lens){.data = lens, .ndim = t->ndim, .shape = {t->shape[0], t->ndim == 2 ? t->shape[1] : 0}};
    return ATTN_OK;
}

attn_status op_load_masks(op_run *run, const op_mechanism *mech)
{
    static const struct {
        const char *name;
        unsigned flag;
        attn_status (*load)(op_run *, const op_mechanism *, const attn_st_tensor *);
    } masks[] = {
        {"attn_mask", OP_ATTN_MASK, load_attn_mask},
        {"key_padding_mask", OP_KEY_PADDING, load_key_padding},
        {"valid_lens", OP_VALID_LENS, load_valid_lens},
    };
    run->mask.causal = run->args->causal;
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        const attn_st_tensor *t = attn_st_find(run->file, masks[i].name);
        if (!t) continue;
        if (!(mech->masks & masks[i].flag)) {
            fprintf(stderr,
                    "attn op %s: the input has a tensor named %s, which %s does not take "
                    "(see attn op --help)\n",
                    mech->name, masks[i].name, mech->name);
            return ATTN_ERR_ARG;
        }
        attn_status st = masks[i].load(run, mech, t);
        if (st != ATTN_OK) return st;
    }
    return ATTN_OK;
}
