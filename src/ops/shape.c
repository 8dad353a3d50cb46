/* Shape ops (dy = the output's gradient):
 *   reshape:     y = x in a new shape, sharing x's data (a view)     dx += dy
 *   permute:     y[i_perm] = x[i] (a contiguous copy)                dx += permute(dy, perm^-1)
 *   transpose:   permute swapping two dims
 *   split_heads: (B, L, H*D) -> (B, L, H, D) permuted (0, 2, 1, 3) -> (B, H, L, D)
 *   merge_heads: (B, H, L, D) permuted (0, 2, 1, 3) -> (B, L, H, D) -> (B, L, H*D)
 *   heads of a block (fused_internal.h): (B, L, n*H*D) -> split_heads of columns [j H D, (j+1) H D)
 *   concat:      y = [x_0, x_1, ...] along dim                       dx_i += dy's slice i
 *   split:       y_i = x's slice i along dim (copies)                dx's slice i += dy_i
 * All permutations go through one kernel, permute_kernel (a block's heads have their own loops). */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"
#include "fused_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- reshape: a view ---- */

static attn_status reshape_backward(attn_ctx *ctx, attn_node *node)
{
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    attn__add_into(gx, node->out->grad, node->out->numel, ctx->num_threads);
    return ATTN_OK;
}

/* Copies shape into out with a -1 inferred from numel; false (with error) when impossible. */
static bool reshape_infer(int64_t *out, const attn_tensor *x, int ndim, const int64_t *shape)
{
    char sx[64], ss[96];
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (shape[i] < 0 || !attn__mul_ok(known, shape[i], &known)) {
            attn__fail(ATTN_ERR_SHAPE, "reshape: x %s to %s: sizes must be >= 0 with at most one -1",
                       attn_shape_str(x, sx, 64), attn__dims_str(ss, 96, ndim, shape));
            return false;
        }
    }
    if (infer >= 0 && known > 0 && x->numel % known == 0) out[infer] = x->numel / known;
    if (infer >= 0 ? out[infer] < 0 : known != x->numel) {
        attn__fail(ATTN_ERR_SHAPE, "reshape: x %s (%lld elements) cannot be viewed as %s", attn_shape_str(x, sx, 64),
                   (long long)x->numel, attn__dims_str(ss, 96, ndim, shape));
        return false;
    }
    return true;
}

attn_tensor *attn_reshape(attn_ctx *ctx, attn_tensor *x, int ndim, const int64_t *shape)
{
    if (!ctx || !x) return attn__null_input(__func__);
    if (ndim < 0 || ndim > ATTN_MAX_DIMS || (ndim > 0 && !shape))
        return attn__fail_null(ATTN_ERR_ARG, "reshape: %d dims%s, expected 0 to %d and a shape", ndim,
                               ndim > 0 && !shape ? " with a NULL shape" : "", ATTN_MAX_DIMS);
    int64_t out_shape[ATTN_MAX_DIMS];
    if (!reshape_infer(out_shape, x, ndim, shape)) return NULL;
    attn_tensor *y = attn__arena_alloc(&ctx->arena, sizeof *y);
    if (!y) return NULL;
    *y = (attn_tensor){.data = x->data, .ndim = ndim, .numel = x->numel, .storage = ATTN_STORAGE_VIEW};
    for (int i = 0; i < ATTN_MAX_DIMS; i++) y->shape[i] = i < ndim ? out_shape[i] : 1;
    if (attn__needs_grad(ctx, &x, 1) && !attn__record(ctx, "reshape", reshape_backward, y, &x, 1, 0)) return NULL;
    return y;
}

/* ---- permute: one kernel for transpose, permute, split_heads and merge_heads ---- */

/* out = in permuted: in has shape (ndim dims), out.shape[i] = shape[perm[i]]; += when acc. */
static void permute_kernel(float *out, const float *in, int ndim, const int64_t *shape, const int *perm, bool acc,
                           int threads)
{
    int64_t in_stride[ATTN_MAX_DIMS], os[4] = {1, 1, 1, 1}, st[4] = {0, 0, 0, 0};
    for (int64_t i = ndim - 1, s = 1; i >= 0; i--) {
        in_stride[i] = s;
        s *= shape[i];
    }
    for (int i = 0; i < ndim; i++) { /* right-aligned in 4 dims: out sizes, in strides */
        os[4 - ndim + i] = shape[perm[i]];
        st[4 - ndim + i] = in_stride[perm[i]];
    }
    int64_t n01 = os[0] * os[1], inner = os[2] * os[3];
#pragma omp parallel for schedule(static) num_threads(threads) if (n01 > 1 && n01 * inner > ATTN_PARALLEL_MIN)
    for (int64_t ab = 0; ab < n01; ab++) {
        const float *src = in + (ab / os[1]) * st[0] + (ab % os[1]) * st[1];
        float *dst = out + ab * inner;
        for (int64_t c = 0; c < os[2]; c++) {
            const float *s = src + c * st[2];
            float *o = dst + c * os[3];
            if (st[3] == 1 && acc) /* rows of the last dim contiguous (split and merge heads) */
                for (int64_t d = 0; d < os[3]; d++) o[d] += s[d];
            else if (st[3] == 1)
                memcpy(o, s, (size_t)os[3] * sizeof(float));
            else
                for (int64_t d = 0; d < os[3]; d++) o[d] = acc ? o[d] + s[d * st[3]] : s[d * st[3]];
        }
    }
}

typedef struct permute_saved {
    int ndim;
    int64_t out_shape[ATTN_MAX_DIMS]; /* the logical permuted shape (before any merge) */
    int inv[ATTN_MAX_DIMS];           /* perm^-1 */
} permute_saved;

static attn_status permute_backward(attn_ctx *ctx, attn_node *node)
{
    const permute_saved *s = node->saved;
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    permute_kernel(gx, node->out->grad, s->ndim, s->out_shape, s->inv, true, ctx->num_threads);
    return ATTN_OK;
}

/* y = x seen as `shape` (ndim dims, same numel), permuted by perm (already checked), then seen
 * as y_shape (y_ndim dims, same numel). */
static attn_tensor *permute_op(attn_ctx *ctx, attn_tensor *x, const char *op, int ndim, const int64_t *shape,
                               const int *perm, int y_ndim, const int64_t *y_shape)
{
    attn_tensor *y = attn_tensor_empty(ctx, y_ndim, y_shape);
    if (!y) return NULL;
    permute_kernel(y->data, x->data, ndim, shape, perm, false, ctx->num_threads);
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, op, permute_backward, y, &x, 1, sizeof(permute_saved));
        if (!node) return NULL;
        permute_saved *s = node->saved;
        s->ndim = ndim;
        for (int i = 0; i < ndim; i++) {
            s->out_shape[i] = shape[perm[i]];
            s->inv[perm[i]] = i;
        }
    }
    return y;
}

/* Normalises perm into p (negative entries count from the end); false (with error) unless it
 * is a permutation of 0..ndim-1. */
static bool perm_check(int *p, const attn_tensor *x, const int *perm)
{
    bool seen[ATTN_MAX_DIMS] = {false};
    for (int i = 0; i < x->ndim; i++) {
        int d = perm[i] < 0 ? perm[i] + x->ndim : perm[i];
        if (d < 0 || d >= x->ndim || seen[d]) {
            char sx[64];
            attn__fail(ATTN_ERR_ARG, "permute: x %s: entry %d of perm is %d; expected each of 0..%d once",
                       attn_shape_str(x, sx, 64), i, perm[i], x->ndim - 1);
            return false;
        }
        seen[d] = true;
        p[i] = d;
    }
    return true;
}

attn_tensor *attn_permute(attn_ctx *ctx, attn_tensor *x, const int *perm)
{
    if (!ctx || !x) return attn__null_input(__func__);
    if (!perm) return attn__fail_null(ATTN_ERR_ARG, "permute: perm is NULL");
    int p[ATTN_MAX_DIMS];
    if (!perm_check(p, x, perm)) return NULL;
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[p[i]];
    return permute_op(ctx, x, "permute", x->ndim, x->shape, p, x->ndim, shape);
}

attn_tensor *attn_transpose(attn_ctx *ctx, attn_tensor *x, int dim0, int dim1)
{
    if (!ctx || !x) return attn__null_input(__func__);
    int d0 = attn__dim(dim0, x->ndim, "transpose"), d1 = attn__dim(dim1, x->ndim, "transpose");
    if (d0 < 0 || d1 < 0) return NULL;
    int p[ATTN_MAX_DIMS];
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) p[i] = i;
    p[d0] = d1;
    p[d1] = d0;
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[p[i]];
    return permute_op(ctx, x, "transpose", x->ndim, x->shape, p, x->ndim, shape);
}

static const int heads_perm[4] = {0, 2, 1, 3};

attn_tensor *attn_split_heads(attn_ctx *ctx, attn_tensor *x, int64_t num_heads)
{
    if (!ctx || !x) return attn__null_input(__func__);
    char sx[64];
    if (num_heads < 1)
        return attn__fail_null(ATTN_ERR_ARG, "split_heads: num_heads is %lld, expected >= 1", (long long)num_heads);
    if (x->ndim != 3 || x->shape[2] % num_heads != 0)
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "split_heads: x %s, expected (B, L, H*D) with H = %lld dividing "
                               "the last size",
                               attn_shape_str(x, sx, 64), (long long)num_heads);
    int64_t b = x->shape[0], l = x->shape[1], d = x->shape[2] / num_heads;
    int64_t in4[4] = {b, l, num_heads, d}, out4[4] = {b, num_heads, l, d};
    return permute_op(ctx, x, "split_heads", 4, in4, heads_perm, 4, out4);
}

attn_tensor *attn_merge_heads(attn_ctx *ctx, attn_tensor *x)
{
    if (!ctx || !x) return attn__null_input(__func__);
    char sx[64];
    if (x->ndim != 4)
        return attn__fail_null(ATTN_ERR_SHAPE, "merge_heads: x %s, expected (B, H, L, D)", attn_shape_str(x, sx, 64));
    int64_t b = x->shape[0], h = x->shape[1], l = x->shape[2], d = x->shape[3];
    int64_t out3[3] = {b, l, h * d};
    return permute_op(ctx, x, "merge_heads", 4, x->shape, heads_perm, 3, out3);
}

/* ---- the heads of one column block ---- */

typedef struct block_heads {
    int64_t B, L, H, D, width, col0; /* x (B, L, width), the block's columns from col0 */
} block_heads;

/* forward (!back): y (B, H, L, D)[b, h, l] = x[b, l, col0 + h D : +D];
 * backward: gx[b, l, col0 + h D : +D] += dy[b, h, l] */
static void block_heads_copy(const block_heads *s, float *y, float *x, bool back, int threads)
{
    const int64_t n01 = s->B * s->H;
#pragma omp parallel for schedule(static) num_threads(threads) if (n01 > 1 && n01 * s->L * s->D > ATTN_PARALLEL_MIN)
    for (int64_t bh = 0; bh < n01; bh++) {
        const int64_t b = bh / s->H, h = bh % s->H;
        for (int64_t l = 0; l < s->L; l++) {
            float *yr = y + (bh * s->L + l) * s->D, *xr = x + (b * s->L + l) * s->width + s->col0 + h * s->D;
            if (back)
                for (int64_t d = 0; d < s->D; d++) xr[d] += yr[d];
            else
                memcpy(yr, xr, (size_t)s->D * sizeof *yr);
        }
    }
}

static attn_status block_heads_backward(attn_ctx *ctx, attn_node *node)
{
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    block_heads_copy(node->saved, node->out->grad, gx, true, ctx->num_threads);
    return ATTN_OK;
}

attn_tensor *attn__split_heads_block(attn_ctx *ctx, attn_tensor *x, int64_t block, int64_t blocks, int64_t num_heads)
{
    if (!ctx || !x) return attn__null_input("attn_split_heads");
    char sx[64];
    if (x->ndim != 3 || blocks < 1 || block < 0 || block >= blocks || num_heads < 1 ||
        blocks > x->shape[2] / num_heads || x->shape[2] % (blocks * num_heads) != 0) /* no overflow */
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "split_heads: x %s, expected (B, L, n*H*D) with n = %lld blocks of H = %lld "
                               "heads (block %lld)",
                               attn_shape_str(x, sx, 64), (long long)blocks, (long long)num_heads, (long long)block);
    const int64_t E = x->shape[2] / blocks;
    block_heads s = {x->shape[0], x->shape[1], num_heads, E / num_heads, x->shape[2], block * E};
    attn_tensor *y = attn_tensor_empty(ctx, 4, (int64_t[]){s.B, s.H, s.L, s.D});
    if (!y) return NULL;
    block_heads_copy(&s, y->data, x->data, false, ctx->num_threads);
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, "split_heads", block_heads_backward, y, &x, 1, sizeof s);
        if (!node) return NULL;
        *(block_heads *)node->saved = s;
    }
    return y;
}

/* ---- concat and split: slices along dim, x seen as (outer, n, inner) ---- */

/* dst (outer, dst_n, inner) [:, dst_off : dst_off + n, :] (+)= src (outer, src_n, inner)
 * [:, src_off : src_off + n, :]. */
static void copy_slices(float *dst, int64_t dst_n, int64_t dst_off, const float *src, int64_t src_n, int64_t src_off,
                        int64_t outer, int64_t n, int64_t inner, bool acc)
{
    int64_t len = n * inner;
    for (int64_t o = 0; o < outer; o++) {
        float *d = dst + (o * dst_n + dst_off) * inner;
        const float *s = src + (o * src_n + src_off) * inner;
        if (acc)
            for (int64_t i = 0; i < len; i++) d[i] += s[i];
        else if (len)
            memcpy(d, s, (size_t)len * sizeof(float));
    }
}

typedef struct slice_saved {
    int dim;
    int64_t offset; /* split: where this part starts along dim in x */
} slice_saved;

static attn_status concat_backward(attn_ctx *ctx, attn_node *node)
{
    (void)ctx;
    const slice_saved *s = node->saved;
    const attn_tensor *y = node->out;
    int64_t outer = attn__prod(y->shape, 0, s->dim);
    int64_t inner = attn__prod(y->shape, s->dim + 1, y->ndim);
    int64_t off = 0;
    for (int i = 0; i < node->n_in; i++) {
        float *gx = node->grad[i];
        int64_t n = node->in[i]->shape[s->dim];
        if (gx) copy_slices(gx, n, 0, y->grad, y->shape[s->dim], off, outer, n, inner, true);
        off += n;
    }
    return ATTN_OK;
}

/* xs[i] fits xs[0]: same ndim and sizes except along d. */
static bool concat_fits(const attn_tensor *a, const attn_tensor *b, int d)
{
    if (a->ndim != b->ndim) return false;
    for (int k = 0; k < a->ndim; k++)
        if (k != d && a->shape[k] != b->shape[k]) return false;
    return true;
}

attn_tensor *attn_concat(attn_ctx *ctx, attn_tensor *const *xs, int n, int dim)
{
    if (!ctx) return attn__null_input(__func__);
    if (!xs || n < 1)
        return attn__fail_null(ATTN_ERR_ARG, "concat: %s, expected an array of at least 1 tensor",
                               xs ? "no tensors" : "xs is NULL");
    for (int i = 0; i < n; i++)
        if (!xs[i]) return attn__null_input(__func__);
    int d = attn__dim(dim, xs[0]->ndim, "concat");
    if (d < 0) return NULL;
    int64_t shape[ATTN_MAX_DIMS], total = 0;
    for (int i = 0; i < n; i++) {
        if (!concat_fits(xs[0], xs[i], d)) {
            char s0[64], si[64];
            return attn__fail_null(ATTN_ERR_SHAPE, "concat: xs[0] %s and xs[%d] %s differ outside dim %d",
                                   attn_shape_str(xs[0], s0, 64), i, attn_shape_str(xs[i], si, 64), d);
        }
        total += xs[i]->shape[d];
    }
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[d] = total;
    attn_tensor *y = attn_tensor_empty(ctx, xs[0]->ndim, shape);
    if (!y) return NULL;
    int64_t outer = attn__prod(shape, 0, d), inner = attn__prod(shape, d + 1, y->ndim), off = 0;
    for (int i = 0; i < n; i++) {
        int64_t ni = xs[i]->shape[d];
        copy_slices(y->data, total, off, xs[i]->data, ni, 0, outer, ni, inner, false);
        off += ni;
    }
    if (attn__needs_grad(ctx, xs, n)) {
        attn_node *node = attn__record(ctx, "concat", concat_backward, y, xs, n, sizeof(slice_saved));
        if (!node) return NULL;
        *(slice_saved *)node->saved = (slice_saved){d, 0};
    }
    return y;
}

static attn_status split_backward(attn_ctx *ctx, attn_node *node)
{
    (void)ctx;
    const slice_saved *s = node->saved;
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const attn_tensor *x = node->in[0], *y = node->out;
    int64_t n = y->shape[s->dim];
    copy_slices(gx, x->shape[s->dim], s->offset, y->grad, n, 0, attn__prod(x->shape, 0, s->dim), n,
                attn__prod(x->shape, s->dim + 1, x->ndim), true);
    return ATTN_OK;
}

/* sizes are >= 0 and sum to x's size along d; false (with error) otherwise. */
static bool split_sizes_ok(const attn_tensor *x, int d, const int64_t *sizes, int n)
{
    int64_t sum = 0;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        ok = sizes[i] >= 0 && sizes[i] <= x->shape[d] - sum;
        sum += ok ? sizes[i] : 0;
    }
    if (ok && sum == x->shape[d]) return true;
    char sx[64];
    attn__fail(ATTN_ERR_SHAPE,
               "split: x %s along dim %d (size %lld) into %d parts: sizes must be >= 0 and sum "
               "to %lld",
               attn_shape_str(x, sx, 64), d, (long long)x->shape[d], n, (long long)x->shape[d]);
    return false;
}

attn_status attn_split(attn_ctx *ctx, attn_tensor *x, int dim, const int64_t *sizes, int n, attn_tensor **outs)
{
    if (outs)
        for (int i = 0; i < n; i++) outs[i] = NULL;
    if (!x) /* an earlier op failed: keep its error */
        return attn_last_status() != ATTN_OK ? attn_last_status() : attn__fail(ATTN_ERR_ARG, "split: x is NULL");
    if (!ctx || !sizes || !outs || n < 1)
        return attn__fail(ATTN_ERR_ARG, "split: ctx, sizes or outs is NULL, or n = %d < 1", n);
    int d = attn__dim(dim, x->ndim, "split");
    if (d < 0) return attn_last_status();
    if (!split_sizes_ok(x, d, sizes, n)) return attn_last_status();
    int64_t shape[ATTN_MAX_DIMS], outer = attn__prod(x->shape, 0, d);
    int64_t inner = attn__prod(x->shape, d + 1, x->ndim), off = 0;
    memcpy(shape, x->shape, sizeof shape);
    bool grad = attn__needs_grad(ctx, &x, 1);
    for (int i = 0; i < n; i++) {
        shape[d] = sizes[i];
        attn_tensor *y = attn_tensor_empty(ctx, x->ndim, shape);
        if (!y) return attn_last_status();
        copy_slices(y->data, sizes[i], 0, x->data, x->shape[d], off, outer, sizes[i], inner, false);
        if (grad) {
            attn_node *node = attn__record(ctx, "split", split_backward, y, &x, 1, sizeof(slice_saved));
            if (!node) return attn_last_status();
            *(slice_saved *)node->saved = (slice_saved){d, off};
        }
        outs[i] = y;
        off += sizes[i];
    }
    return ATTN_OK;
}
