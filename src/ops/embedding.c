/* Embedding lookup: rows of a (V, E) table gathered by integer ids.
 *   forward:  y[i, :] = W[ids[i], :]                       for every position i of ids
 *   backward: dW[ids[i], :] += dy[i, :]   unless ids[i] == padding_idx (that row gets no
 *             gradient, as torch.nn.functional.embedding)
 * The ids are copied into the arena so the caller's array need not outlive the forward.
 */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

#include <stdio.h>
#include <string.h>

#define EMB_COL_BLOCK 32 /* columns per task of the backward */

typedef struct embedding_saved {
    const int64_t *ids; /* (n) copy in the arena */
    int64_t n, dim, padding_idx;
} embedding_saved;

static attn_status embedding_backward(attn_ctx *ctx, attn_node *node)
{
    const embedding_saved *s = node->saved;
    float *dw = node->grad[0]; /* (V, E) */
    if (!dw) return ATTN_OK;
    const float *dy = node->out->grad; /* (n, E) */
    /* ids repeat, so rows collide: the threads split the columns instead, each adding every
     * position's slice in position order (the same sums as one thread) */
    const int64_t n = s->n, dim = s->dim, blocks = (dim + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (blocks > 1 && n * dim > ATTN_PARALLEL_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t c0 = blk * EMB_COL_BLOCK, width = dim - c0 < EMB_COL_BLOCK ? dim - c0 : EMB_COL_BLOCK;
        for (int64_t i = 0; i < n; i++) {
            if (s->ids[i] == s->padding_idx) continue;
            float *row = dw + s->ids[i] * dim + c0;
            const float *g = dy + i * dim + c0;
            for (int64_t j = 0; j < width; j++) row[j] += g[j];
        }
    }
    return ATTN_OK;
}

/* "[b, t]": the multi-index of flat position pos in shape. */
static const char *position_str(char *buf, size_t len, int64_t pos, int ndim, const int64_t *shape)
{
    int64_t idx[ATTN_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? pos % shape[d] : 0;
        pos = shape[d] ? pos / shape[d] : 0;
    }
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

/* Every id in [0, V); else ATTN_ERR_ARG naming the first bad id, its position and V. */
static attn_status check_ids(const int64_t *ids, int64_t n, int ndim, const int64_t *shape, int64_t vocab)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) {
            char pos[96];
            return attn__fail(ATTN_ERR_ARG,
                              "embedding: id %lld at position %s is outside [0, %lld) (the table "
                              "has %lld rows)",
                              (long long)ids[i], position_str(pos, sizeof pos, i, ndim, shape), (long long)vocab,
                              (long long)vocab);
        }
    return ATTN_OK;
}

static attn_status embedding_check(const attn_tensor *w, const int64_t *ids, int ndim, const int64_t *shape,
                                   int64_t padding_idx, int64_t *n)
{
    char ws[64];
    if (w->ndim != 2)
        return attn__fail(ATTN_ERR_SHAPE, "embedding: weight %s, expected (num, dim)", attn_shape_str(w, ws, 64));
    if (ndim < 0 || ndim > ATTN_MAX_DIMS - 1)
        return attn__fail(ATTN_ERR_SHAPE, "embedding: ids have %d dims, expected 0 to %d", ndim, ATTN_MAX_DIMS - 1);
    if (attn__shape_numel(ndim, shape, n, "embedding ids") != ATTN_OK) return attn_last_status();
    if (*n > 0 && !ids) return attn__fail(ATTN_ERR_ARG, "embedding: ids is NULL");
    if (padding_idx >= w->shape[0])
        return attn__fail(ATTN_ERR_ARG,
                          "embedding: padding_idx %lld is outside the table of %lld rows "
                          "(use a negative value for none)",
                          (long long)padding_idx, (long long)w->shape[0]);
    return check_ids(ids, *n, ndim, shape, w->shape[0]);
}

attn_tensor *attn_embedding(attn_ctx *ctx, attn_tensor *weight, const int64_t *ids, int ndim, const int64_t *shape,
                            int64_t padding_idx)
{
    if (!ctx || !weight) return attn__null_input(__func__);
    int64_t n;
    if (embedding_check(weight, ids, ndim, shape, padding_idx, &n) != ATTN_OK) return NULL;
    int64_t dim = weight->shape[1];
    int64_t out_shape[ATTN_MAX_DIMS];
    for (int i = 0; i < ndim; i++) out_shape[i] = shape[i];
    out_shape[ndim] = dim;
    attn_tensor *y = attn_tensor_empty(ctx, ndim + 1, out_shape); /* (ids shape..., E) */
    if (!y) return NULL;
    float *yd = y->data;
    const float *wd = weight->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n * dim > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) memcpy(yd + i * dim, wd + ids[i] * dim, (size_t)dim * sizeof(float));
    if (attn__needs_grad(ctx, &weight, 1)) {
        int64_t *copy = attn__arena_alloc(&ctx->arena, (size_t)(n ? n : 1) * sizeof *copy);
        attn_node *node =
            copy ? attn__record(ctx, "embedding", embedding_backward, y, &weight, 1, sizeof(embedding_saved)) : NULL;
        if (!node) return NULL;
        if (n) memcpy(copy, ids, (size_t)n * sizeof *copy);
        *(embedding_saved *)node->saved = (embedding_saved){copy, n, dim, padding_idx < 0 ? -1 : padding_idx};
    }
    return y;
}
