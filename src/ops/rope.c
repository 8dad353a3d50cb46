/* Rotary position embeddings (RoFormer; GPT-NeoX, GPT-J, ggml), forward and backward:
 *   for each row of x at position p and each rotated pair (a, b) of its first rot dims, with
 *   theta_i = p base^(-2i / rot):
 *     y_a = a cos theta_i - b sin theta_i,   y_b = a sin theta_i + b cos theta_i
 *   pairs: ATTN_ROPE_INTERLEAVED (2i, 2i + 1) (GPT-J, ggml's normal mode);
 *          ATTN_ROPE_HALVES (i, i + rot / 2) (GPT-NeoX, ggml's NeoX mode, Hugging Face's rotate_half)
 *   dims past rot pass through. Backward: the rotation by -theta, dx_a = dy_a cos + dy_b sin,
 *   dx_b = -dy_a sin + dy_b cos.
 * The angles and their cos and sin are computed in double and rounded once (a float32 angle of
 * position 10^4 is off by 10^-3 rad); one table of (positions, rot / 2) cos and sin per call,
 * kept for the backward. */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"
#include "rope_internal.h"

#include <math.h>
#include <string.h>

typedef struct rope_saved {
    const float *cs;        /* (n_pos, rot / 2, 2) cos, sin */
    const int64_t *row_pos; /* (rows) the position index of each row, into cs */
    int64_t rows, d, rot;
    attn_rope_layout layout;
} rope_saved;

void attn__rope_table(float *cs, const int64_t *positions, int64_t n_pos, int64_t rot, float base)
{
    const int64_t half = rot / 2;
    for (int64_t p = 0; p < n_pos; p++) {
        const int64_t pos = positions ? positions[p] : p;
        for (int64_t i = 0; i < half; i++) {
            const double theta = (double)pos * pow((double)base, -2.0 * (double)i / (double)rot);
            cs[(p * half + i) * 2] = (float)cos(theta), cs[(p * half + i) * 2 + 1] = (float)sin(theta);
        }
    }
}

void attn__rope_rotate_row(float *y, const float *x, const float *cs, int64_t d, int64_t rot, attn_rope_layout layout,
                           bool inverse)
{
    const int64_t half = rot / 2;
    for (int64_t i = 0; i < half; i++) {
        const int64_t ia = layout == ATTN_ROPE_INTERLEAVED ? 2 * i : i,
                      ib = layout == ATTN_ROPE_INTERLEAVED ? 2 * i + 1 : i + half;
        const float c = cs[2 * i], s = inverse ? -cs[2 * i + 1] : cs[2 * i + 1], a = x[ia], b = x[ib];
        y[ia] = a * c - b * s;
        y[ib] = a * s + b * c;
    }
    if (y != x) memcpy(y + rot, x + rot, (size_t)(d - rot) * sizeof(float));
}

static attn_status rope_backward(attn_ctx *ctx, attn_node *node)
{
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const rope_saved *s = node->saved;
    const float *dy = node->out->grad;
    const int64_t half = s->rot / 2;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (s->rows * s->d > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < s->rows; r++) {
        float tmp[8192]; /* d <= ATTN_ROPE_MAX_DIM */
        attn__rope_rotate_row(tmp, dy + r * s->d, s->cs + s->row_pos[r] * half * 2, s->d, s->rot, s->layout, true);
        for (int64_t c = 0; c < s->d; c++) gx[r * s->d + c] += tmp[c];
    }
    return ATTN_OK;
}

attn_tensor *attn_rope(attn_ctx *ctx, attn_tensor *x, const attn_rope_opts *opts)
{
    if (!ctx || !x || !opts) return attn__null_input(__func__);
    char sb[64];
    const int nd = x->ndim, pd = opts->position_dim;
    const int64_t d = nd ? x->shape[nd - 1] : 0, rot = opts->rotary_dim ? opts->rotary_dim : d;
    if (nd < 2 || pd < 0 || pd >= nd - 1)
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "rope: x %s with position_dim %d; expected at least 2 dims and the "
                               "position dim one of those before the last",
                               attn_shape_str(x, sb, 64), pd);
    if (rot < 2 || rot % 2 || rot > d || d > ATTN_ROPE_MAX_DIM)
        return attn__fail_null(ATTN_ERR_ARG,
                               "rope: rotary_dim %lld of %lld dims; expected even, >= 2, at most the "
                               "last dim (and it at most %d)",
                               (long long)rot, (long long)d, ATTN_ROPE_MAX_DIM);
    if (opts->layout != ATTN_ROPE_INTERLEAVED && opts->layout != ATTN_ROPE_HALVES)
        return attn__fail_null(ATTN_ERR_ARG, "rope: layout %d is neither ATTN_ROPE_INTERLEAVED nor ATTN_ROPE_HALVES",
                               (int)opts->layout);
    if (!(opts->base > 1.0f) || isinf(opts->base))
        return attn__fail_null(ATTN_ERR_ARG, "rope: base %g; expected a finite value > 1 (10000 in most models)",
                               (double)opts->base);
    const int64_t n_pos = x->shape[pd];
    if (opts->positions && opts->n_positions != n_pos)
        return attn__fail_null(ATTN_ERR_SHAPE, "rope: %lld positions for dim %d of x %s (%lld)",
                               (long long)opts->n_positions, pd, attn_shape_str(x, sb, 64), (long long)n_pos);
    const int64_t half = rot / 2, rows = x->numel / (d ? d : 1);
    float *cs = attn__arena_alloc(&ctx->arena, (size_t)(n_pos * half * 2 + 1) * sizeof(float));
    int64_t *row_pos = attn__arena_alloc(&ctx->arena, (size_t)(rows + 1) * sizeof(int64_t));
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!cs || !row_pos || !y) return NULL;
    for (int64_t p = 0; opts->positions && p < n_pos; p++)
        if (opts->positions[p] < 0)
            return attn__fail_null(ATTN_ERR_ARG, "rope: position %lld is %lld; expected >= 0", (long long)p,
                                   (long long)opts->positions[p]);
    attn__rope_table(cs, opts->positions, n_pos, rot, opts->base);
    /* the row of flat index r sits at index (r / inner) % n_pos of the position dim */
    int64_t inner = 1;
    for (int i = pd + 1; i < nd - 1; i++) inner *= x->shape[i];
    for (int64_t r = 0; r < rows; r++) row_pos[r] = r / inner % n_pos;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (x->numel > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        attn__rope_rotate_row(y->data + r * d, x->data + r * d, cs + row_pos[r] * half * 2, d, rot, opts->layout,
                              false);
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, "rope", rope_backward, y, &x, 1, sizeof(rope_saved));
        if (!node) return NULL;
        *(rope_saved *)node->saved = (rope_saved){cs, row_pos, rows, d, rot, opts->layout};
    }
    return y;
}
