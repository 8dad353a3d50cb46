/* Losses, each a scalar (ndim 0) mean, as torch.nn.functional with reduction='mean'.
 *
 * Cross entropy with label smoothing eps over logits z (N, C) and class targets t (N):
 *   lse_i  = max_c z_ic + log sum_c exp(z_ic - max_c z_ic)       (log p_ic = z_ic - lse_i)
 *   loss_i = (1 - eps) * (lse_i - z_it) + eps/C * sum_c (lse_i - z_ic)
 *   loss   = sum over kept rows of loss_i / count,   kept = rows with t_i != ignore_index
 *   backward: dz_ic += dloss / count * (p_ic - (1 - eps) [c == t_i] - eps/C)   (kept rows only)
 * The rows are attn__cross_entropy_rows (kernels/cross_entropy.c: threaded, vectorised exp).
 * When every row is ignored (or there are none), the mean is 0/0 = NaN, as torch gives it, and
 * the gradient 0, as torch's.
 *
 * Mean squared error over n elements:
 *   loss = sum (pred - target)^2 / n
 *   backward: dpred += dloss * 2 (pred - target) / n,   dtarget -= the same
 */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

#include <math.h>
#include <string.h>

/* ---- cross entropy ---- */

typedef struct ce_saved {
    const int64_t *target; /* (N) copy in the arena */
    const float *max;      /* (N) max logit of each row */
    const double *sum;     /* (N) sum of exp(logit - max) of each row */
    int64_t rows, classes, ignore_index, count;
    double eps;
} ce_saved;

static attn_status cross_entropy_backward(attn_ctx *ctx, attn_node *node)
{
    const ce_saved *s = node->saved;
    float *dz = node->grad[0]; /* (N, C) */
    if (!dz || s->count == 0) return ATTN_OK;
    double scale = (double)node->out->grad[0] / (double)s->count;
    attn__cross_entropy_rows_backward(dz, node->in[0]->data, s->max, s->sum, s->target, s->rows, s->classes,
                                      s->ignore_index, s->eps, scale, ctx->num_threads);
    return ATTN_OK;
}

/* Targets in [0, C) or ignore_index; counts the kept rows. */
static attn_status ce_check_targets(const int64_t *target, int64_t rows, int64_t classes, int64_t ignore_index,
                                    int64_t *count)
{
    *count = 0;
    for (int64_t i = 0; i < rows; i++) {
        if (target[i] == ignore_index) continue;
        if (target[i] < 0 || target[i] >= classes)
            return attn__fail(ATTN_ERR_ARG,
                              "cross_entropy: target %lld at row %lld is outside [0, %lld) and "
                              "is not ignore_index (%lld)",
                              (long long)target[i], (long long)i, (long long)classes, (long long)ignore_index);
        (*count)++;
    }
    return ATTN_OK;
}

static attn_status ce_check(const attn_tensor *logits, const int64_t *target, float smoothing)
{
    char ls[64];
    if (logits->ndim != 2 || logits->shape[1] < 1)
        return attn__fail(ATTN_ERR_SHAPE, "cross_entropy: logits %s, expected (N, C) with C >= 1",
                          attn_shape_str(logits, ls, 64));
    if (logits->shape[0] > 0 && !target) return attn__fail(ATTN_ERR_ARG, "cross_entropy: target is NULL");
    if (!(smoothing >= 0.0f && smoothing <= 1.0f))
        return attn__fail(ATTN_ERR_ARG, "cross_entropy: label_smoothing %g, expected in [0, 1]", (double)smoothing);
    return ATTN_OK;
}

attn_tensor *attn_cross_entropy(attn_ctx *ctx, attn_tensor *logits, const int64_t *target, int64_t ignore_index,
                                float label_smoothing)
{
    if (!ctx || !logits) return attn__null_input(__func__);
    if (ce_check(logits, target, label_smoothing) != ATTN_OK) return NULL;
    ce_saved s = {NULL, NULL, NULL, logits->shape[0], logits->shape[1], ignore_index, 0, (double)label_smoothing};
    if (ce_check_targets(target, s.rows, s.classes, ignore_index, &s.count) != ATTN_OK) return NULL;
    size_t rows_alloc = (size_t)(s.rows ? s.rows : 1);
    float *max = attn__arena_alloc(&ctx->arena, rows_alloc * sizeof *max);            /* (N) */
    double *sum = attn__arena_alloc(&ctx->arena, rows_alloc * sizeof *sum);           /* (N) */
    double *row_loss = attn__arena_alloc(&ctx->arena, rows_alloc * sizeof *row_loss); /* (N) */
    attn_tensor *y = attn_tensor_empty(ctx, 0, NULL);
    if (!max || !sum || !row_loss || !y) return NULL;
    attn__cross_entropy_rows(max, sum, row_loss, logits->data, target, s.rows, s.classes, ignore_index, s.eps,
                             ctx->num_threads);
    double total = 0.0;
    for (int64_t i = 0; i < s.rows; i++) total += row_loss[i];
    y->data[0] = s.count ? (float)(total / (double)s.count) : NAN;
    if (attn__needs_grad(ctx, &logits, 1)) {
        int64_t *copy = attn__arena_alloc(&ctx->arena, rows_alloc * sizeof *copy);
        attn_node *node =
            copy ? attn__record(ctx, "cross_entropy", cross_entropy_backward, y, &logits, 1, sizeof(ce_saved)) : NULL;
        if (!node) return NULL;
        if (s.rows) memcpy(copy, target, (size_t)s.rows * sizeof *copy);
        s.target = copy;
        s.max = max, s.sum = sum;
        *(ce_saved *)node->saved = s;
    }
    return y;
}

/* ---- mean squared error ---- */

static attn_status mse_backward(attn_ctx *ctx, attn_node *node)
{
    (void)ctx;
    float *dp = node->grad[0], *dt = node->grad[1];
    const float *p = node->in[0]->data, *t = node->in[1]->data;
    int64_t n = node->in[0]->numel;
    float scale = (float)(2.0 * node->out->grad[0] / (double)n);
    for (int64_t i = 0; i < n; i++) {
        float g = scale * (p[i] - t[i]);
        if (dp) dp[i] += g;
        if (dt) dt[i] -= g;
    }
    return ATTN_OK;
}

attn_tensor *attn_mse_loss(attn_ctx *ctx, attn_tensor *pred, attn_tensor *target)
{
    if (!ctx || !pred || !target) return attn__null_input(__func__);
    if (!attn_same_shape(pred, target)) {
        char ps[64], ts[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "mse_loss: pred %s and target %s, expected the same shape",
                               attn_shape_str(pred, ps, 64), attn_shape_str(target, ts, 64));
    }
    attn_tensor *y = attn_tensor_empty(ctx, 0, NULL);
    if (!y) return NULL;
    double sum = 0.0;
    for (int64_t i = 0; i < pred->numel; i++) {
        double d = (double)pred->data[i] - target->data[i];
        sum += d * d;
    }
    y->data[0] = (float)(sum / (double)pred->numel); /* 0/0 = NaN for no elements, as torch */
    attn_tensor *in[2] = {pred, target};
    if (attn__needs_grad(ctx, in, 2) && !attn__record(ctx, "mse_loss", mse_backward, y, in, 2, 0)) return NULL;
    return y;
}
