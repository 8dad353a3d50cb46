/* attn op sdpa on packed sequences: when the input file holds cu_seqlens_q and cu_seqlens_k,
 * q (total_q, H, D), k and v (total_k, H_kv, .) go to attn_sdpa_varlen (FlashAttention's varlen
 * call) with sdpa's options; --causal is then FlashAttention's, bottom-right in each sequence.
 * The padded call's masks and weights do not apply there and are refused. */
#include "op_io.h"

#include <stdio.h>
#include <stdlib.h>

bool op_varlen_in(const op_run *run)
{
    return attn_st_find(run->file, "cu_seqlens_q") || attn_st_find(run->file, "cu_seqlens_k");
}

/* Offsets tensor `name`: an integer dtype of one dim (B + 1) as int64, malloc'd; NULL with a
 * message otherwise */
static int64_t *offsets(const op_run *run, const char *name, const char *other, int64_t *count)
{
    const attn_st_tensor *t = attn_st_find(run->file, name);
    if (!t) {
        fprintf(stderr,
                "attn op sdpa: the input has %s but not %s; packed sequences take both (B + 1 offsets "
                "each)\n",
                other, name);
        attn_clear_error(); /* said here */
        return NULL;
    }
    const attn_dtype d = t->dtype;
    if (t->ndim != 1 || !(d == ATTN_DTYPE_I64 || d == ATTN_DTYPE_I32 || d == ATTN_DTYPE_I16 || d == ATTN_DTYPE_I8 ||
                          d == ATTN_DTYPE_U8)) {
        fprintf(stderr,
                "attn op sdpa: %s is %s with %d dims; expected an integer dtype (I64, I32, ...) of shape "
                "(B + 1)\n",
                name, attn_dtype_name(d), t->ndim);
        attn_clear_error();
        return NULL;
    }
    return attn_st_load_i64(run->file, name, count);
}

/* x (total, H, D) with --rope-base: each sequence's rows turned from position 0 (x itself without
 * it, or when cu is not offsets of x: attn_sdpa_varlen's check names them); NULL on failure */
static attn_tensor *rotated(op_run *run, attn_tensor *x, const int64_t *cu, int64_t batch)
{
    attn_rope_opts ro;
    if (!op_rope(run->args, 0, &ro)) return x;
    bool offsets = cu[0] == 0 && cu[batch] == x->shape[0];
    for (int64_t b = 0; offsets && b < batch; b++) offsets = cu[b] <= cu[b + 1];
    if (!offsets) return x;
    int64_t *pos = malloc(sizeof *pos * (size_t)(x->shape[0] ? x->shape[0] : 1)); /* (total) */
    if (!pos) {
        attn_set_error(ATTN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = cu[b]; t < cu[b + 1]; t++) pos[t] = t - cu[b];
    ro.positions = pos, ro.n_positions = x->shape[0];
    attn_tensor *y = attn_rope(run->ctx, x, &ro);
    free(pos);
    return y;
}

attn_tensor *op_sdpa_varlen(op_run *run, attn_tensor *q, attn_tensor *k, attn_tensor *v, const attn_sdpa_opts *o,
                            attn_tensor **weights)
{
    const attn_mask *m = &o->mask;
    if (weights || m->attend || m->blocked || m->additive || m->key_padding || m->valid_lens.data) {
        fprintf(stderr,
                "attn op sdpa: packed sequences (cu_seqlens_q, cu_seqlens_k) take no %s; each sequence "
                "attends to its own keys\n",
                weights ? "--need-weights" : "attn_mask, key_padding_mask or valid_lens");
        attn_clear_error(); /* said here */
        return NULL;
    }
    int64_t nq = 0, nk = 0;
    int64_t *cu_q = offsets(run, "cu_seqlens_q", "cu_seqlens_k", &nq);
    int64_t *cu_k = cu_q ? offsets(run, "cu_seqlens_k", "cu_seqlens_q", &nk) : NULL;
    attn_tensor *out = NULL;
    if (cu_q && cu_k && (nq != nk || nq < 2)) {
        fprintf(stderr,
                "attn op sdpa: cu_seqlens_q has %lld offsets and cu_seqlens_k %lld; expected B + 1 each, "
                "B >= 1\n",
                (long long)nq, (long long)nk);
        attn_clear_error();
    } else if (cu_q && cu_k && (q = rotated(run, q, cu_q, nq - 1)) && (k = rotated(run, k, cu_k, nk - 1))) {
        const attn_varlen_opts vo = {.scale = o->scale,
                                     .causal = m->causal,
                                     .features = o->features,
                                     .enable_gqa = o->enable_gqa,
                                     .dropout_p = o->dropout_p,
                                     .impl = o->impl};
        out = attn_sdpa_varlen(run->ctx, q, k, v, cu_q, cu_k, nq - 1, &vo);
    }
    free(cu_q), free(cu_k);
    return out;
}
