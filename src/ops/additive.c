/* Additive (Bahdanau) attention scores without the (B, Lq, Lk, h) tensor:
 *   forward:  s[b,i,j] = sum_h wv[h] * tanh(qp[b,i,h] + kp[b,j,h])
 *   backward: t = tanh(qp[b,i,h] + kp[b,j,h]) recomputed, g = ds[b,i,j] * wv[h] * (1 - t^2)
 *             dqp[b,i,h] += sum_j g,  dkp[b,j,h] += sum_i g,  dwv[h] += sum_{b,i,j} ds * t */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct additive_dims {
    int64_t batch, lq, lk, h;
} additive_dims;

static attn_status additive_backward(attn_ctx *ctx, attn_node *node)
{
    (void)ctx;
    const additive_dims *s = node->saved;
    float *gq = node->grad[0], *gk = node->grad[1], *gw = node->grad[2];
    const float *qp = node->in[0]->data, *kp = node->in[1]->data, *wv = node->in[2]->data;
    const float *ds = node->out->grad;
    const int64_t H = s->h;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t i = 0; i < s->lq; i++) {
            const float *q = qp + (b * s->lq + i) * H;
            for (int64_t j = 0; j < s->lk; j++) {
                float d = ds[(b * s->lq + i) * s->lk + j];
                if (d == 0.0f) continue;
                const float *k = kp + (b * s->lk + j) * H;
                for (int64_t c = 0; c < H; c++) {
                    float t = tanhf(q[c] + k[c]);
                    float g = d * wv[c] * (1.0f - t * t);
                    if (gq) gq[(b * s->lq + i) * H + c] += g;
                    if (gk) gk[(b * s->lk + j) * H + c] += g;
                    if (gw) gw[c] += d * t;
                }
            }
        }
    return ATTN_OK;
}

attn_tensor *attn_additive_scores(attn_ctx *ctx, attn_tensor *qp, attn_tensor *kp, attn_tensor *wv)
{
    if (!ctx || !qp || !kp || !wv) return attn__null_input(__func__);
    if (qp->ndim != 3 || kp->ndim != 3 || qp->shape[0] != kp->shape[0] || qp->shape[2] != kp->shape[2] ||
        wv->numel != qp->shape[2]) {
        attn__fail_inputs("additive_scores", (const char *const[]){"qp", "kp", "wv"},
                          (const attn_tensor *const[]){qp, kp, wv}, "(B, Lq, h), (B, Lk, h) and h values");
        return NULL;
    }
    additive_dims s = {qp->shape[0], qp->shape[1], kp->shape[1], qp->shape[2]};
    attn_tensor *out = attn_tensor_empty(ctx, 3, (int64_t[]){s.batch, s.lq, s.lk});
    if (!out) return NULL;
    const int64_t H = s.h;
#pragma omp parallel for collapse(2) schedule(static)                                                                  \
    num_threads(ctx->num_threads) if (s.batch * s.lq * s.lk * H > ATTN_PARALLEL_MIN)
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t i = 0; i < s.lq; i++) {
            const float *q = qp->data + (b * s.lq + i) * H;
            for (int64_t j = 0; j < s.lk; j++) {
                const float *k = kp->data + (b * s.lk + j) * H;
                float acc = 0.0f;
                for (int64_t c = 0; c < H; c++) acc += wv->data[c] * tanhf(q[c] + k[c]);
                out->data[(b * s.lq + i) * s.lk + j] = acc;
            }
        }
    attn_tensor *in[3] = {qp, kp, wv};
    if (attn__needs_grad(ctx, in, 3)) {
        attn_node *node = attn__record(ctx, "additive_scores", additive_backward, out, in, 3, sizeof s);
        if (!node) return NULL;
        *(additive_dims *)node->saved = s;
    }
    return out;
}
