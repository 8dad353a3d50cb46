/* Shape checks for the lengths and masks that travel beside tensors as plain arrays: every entry
 * point that takes them calls these before it reads a byte, so a short array is an error that
 * names both shapes, never a read past its end. */
#include "core_internal.h"

#include <stdio.h>

attn_status attn__lens_check(const attn_lens *lens, int64_t batch, int64_t lq, const char *op)
{
    if (!lens || !lens->data) return ATTN_OK;
    char got[64], want1[64], want2[64];
    const int64_t per_batch[1] = {batch}, per_query[2] = {batch, lq};
    attn__dims_str(want1, sizeof want1, 1, per_batch);
    attn__dims_str(want2, sizeof want2, 2, per_query);
    if (lens->ndim == 0)
        return attn__fail(ATTN_ERR_SHAPE,
                          "%s: valid_lens.ndim and .shape are not set; expected (B) = %s or "
                          "(B, Lq) = %s",
                          op, want1, want2);
    if (lens->ndim != 1 && lens->ndim != 2)
        return attn__fail(ATTN_ERR_SHAPE, "%s: valid_lens has %d dims; expected (B) = %s or (B, Lq) = %s", op,
                          lens->ndim, want1, want2);
    attn__dims_str(got, sizeof got, lens->ndim, lens->shape);
    bool fits = lens->shape[0] == batch && (lens->ndim == 1 || lens->shape[1] == lq);
    if (!fits)
        return attn__fail(ATTN_ERR_SHAPE,
                          "%s: valid_lens has shape %s; expected (B) = %s or "
                          "(B, Lq) = %s",
                          op, got, want1, want2);
    const int64_t n = lens->ndim == 1 ? batch : batch * lq; /* both fit: they size tensors */
    for (int64_t i = 0; i < n; i++)
        if (lens->data[i] < 0)
            return attn__fail(ATTN_ERR_ARG, "%s: valid_lens[%lld] = %lld; expected >= 0", op, (long long)i,
                              (long long)lens->data[i]);
    return ATTN_OK;
}

attn_status attn__key_padding_check(const attn_mask *m, int64_t batch, int64_t lk, const char *op)
{
    if (!m || !m->key_padding) return ATTN_OK;
    if (m->key_padding_shape[0] != batch || m->key_padding_shape[1] != lk) {
        char got[64], want[64];
        attn__dims_str(got, sizeof got, 2, m->key_padding_shape);
        attn__dims_str(want, sizeof want, 2, (const int64_t[]){batch, lk});
        if (!m->key_padding_shape[0] && !m->key_padding_shape[1])
            return attn__fail(ATTN_ERR_SHAPE, "%s: key_padding_shape is not set; expected (B, Lk) = %s", op, want);
        return attn__fail(ATTN_ERR_SHAPE, "%s: key_padding has shape %s; expected (B, Lk) = %s", op, got, want);
    }
    return ATTN_OK;
}

attn_status attn__cu_seqlens_check(const int64_t *cu, int64_t batch, int64_t total, const char *op, const char *name,
                                   const char *rows)
{
    if (!cu) return attn__fail(ATTN_ERR_ARG, "%s: %s is NULL; expected %lld + 1 offsets", op, name, (long long)batch);
    if (cu[0] != 0)
        return attn__fail(ATTN_ERR_ARG, "%s: %s[0] = %lld; expected 0 (the offsets start at the first row)", op, name,
                          (long long)cu[0]);
    for (int64_t b = 0; b < batch; b++)
        if (cu[b + 1] < cu[b])
            return attn__fail(ATTN_ERR_ARG,
                              "%s: %s[%lld] = %lld < %s[%lld] = %lld; expected non-decreasing "
                              "offsets (sequence %lld would have a negative length)",
                              op, name, (long long)(b + 1), (long long)cu[b + 1], name, (long long)b, (long long)cu[b],
                              (long long)b);
    if (cu[batch] != total)
        return attn__fail(ATTN_ERR_SHAPE,
                          "%s: %s[%lld] = %lld; expected %s's %lld rows (the last offset is "
                          "the total)",
                          op, name, (long long)batch, (long long)cu[batch], rows, (long long)total);
    return ATTN_OK;
}

int64_t *attn__cu_positions(attn_ctx *ctx, const int64_t *cu, int64_t batch)
{
    int64_t *pos = attn__arena_alloc(&ctx->arena, sizeof *pos * (size_t)(cu[batch] > 0 ? cu[batch] : 1)); /* (total) */
    if (pos)
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = cu[b]; i < cu[b + 1]; i++) pos[i] = i - cu[b];
    return pos;
}
