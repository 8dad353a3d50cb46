/* Rows of a batch (seq2seq_internal.h): the padding mask of its lengths, the argmax of a row of
 * logits, and moving the rows of the decoder's state: gathering them after a beam re-selection,
 * keeping some and packing them after sentences are dropped. */
#include "seq2seq_internal.h"

#include <string.h>

uint8_t *attn__seq2seq_padding(attn_ctx *ctx, const int64_t *lens, int64_t batch, int64_t len)
{
    uint8_t *pad = attn__arena_alloc(&ctx->arena, (size_t)(batch * len));
    if (pad)
        for (int64_t b = 0; b < batch; b++)
            for (int64_t j = 0; j < len; j++) pad[b * len + j] = j >= lens[b];
    return pad;
}

int64_t attn__seq2seq_argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int64_t attn__seq2seq_rows_width(const seq2seq_rows *b)
{
    return b->outer * b->segs * b->len;
}

static float *row_segment(const seq2seq_rows *b, int64_t o, int64_t r, int64_t s)
{
    return b->x + o * b->outer_stride + r * b->row_stride + s * b->seg_stride;
}

/* Row r of the block into packed (outer x segs x len), or packed into row r when `in`. */
static void row_copy(const seq2seq_rows *b, int64_t r, float *packed, bool in)
{
    for (int64_t o = 0; o < b->outer; o++)
        for (int64_t s = 0; s < b->segs; s++) {
            float *at = row_segment(b, o, r, s), *p = packed + (o * b->segs + s) * b->len;
            memcpy(in ? at : p, in ? p : at, (size_t)b->len * sizeof(float));
        }
}

void attn__seq2seq_rows_gather(const seq2seq_rows *b, const int64_t *parents, int64_t n, float *scratch)
{
    const int64_t width = attn__seq2seq_rows_width(b);
    int64_t moved = 0;
    for (int64_t r = 0; r < n; r++) /* every source read before any row is written */
        if (parents[r] != r) row_copy(b, parents[r], scratch + moved++ * width, false);
    moved = 0;
    for (int64_t r = 0; r < n; r++)
        if (parents[r] != r) row_copy(b, r, scratch + moved++ * width, true);
}

/* Row i takes row keep[i] >= i: in increasing i, a row is overwritten only after its last read. */
void attn__seq2seq_rows_keep(const seq2seq_rows *b, const int64_t *keep, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; keep[i] != i && o < b->outer; o++)
            for (int64_t s = 0; s < b->segs; s++)
                memmove(row_segment(b, o, i, s), row_segment(b, o, keep[i], s), (size_t)b->len * sizeof(float));
}

void attn__seq2seq_keep_rows(void *x, size_t size, int64_t outer, int64_t rows, int64_t width, const int64_t *keep,
                             int64_t n)
{
    unsigned char *bytes = x;
    const size_t row = (size_t)width * size;
    for (int64_t o = 0; o < outer; o++) /* packed (outer, n, width): destinations never pass sources */
        for (int64_t i = 0; i < n; i++)
            memmove(bytes + (size_t)(o * n + i) * row, bytes + (size_t)(o * rows + keep[i]) * row, row);
}

void attn__seq2seq_keep_tensor(attn_tensor *t, int dim, const int64_t *keep, int64_t n)
{
    attn__seq2seq_keep_rows(t->data, sizeof(float), attn__prod(t->shape, 0, dim), t->shape[dim],
                            attn__prod(t->shape, dim + 1, t->ndim), keep, n);
    t->numel = t->numel / t->shape[dim] * n;
    t->shape[dim] = n;
}
