/* Gradient clipping as torch.nn.utils.clip_grad_norm_ (1.13, norm_type 2):
 *   norm = sqrt(sum over every gradient element of g^2)   (accumulated in double)
 *   coef = min(1, max_norm / (norm + 1e-6)) in float32;   g *= coef
 * The grads are scaled even when coef is 1 (a no-op), as torch does; a non-finite norm makes
 * coef 0 or NaN, which torch would also apply (error_if_nonfinite defaults to False). */
#include "../core/core_internal.h"

#include <math.h>

float attn_clip_grad_norm(attn_params *p, float max_norm)
{
    if (!p) {
        attn__fail(ATTN_ERR_ARG, "attn_clip_grad_norm: params is NULL");
        return NAN;
    }
    size_t count = attn_params_count(p);
    double sum = 0.0;
    for (size_t i = 0; i < count; i++) {
        const attn_tensor *t = attn_params_at(p, i);
        if (!t->grad) continue; /* torch skips parameters whose .grad is None */
        for (int64_t j = 0; j < t->numel; j++) sum += (double)t->grad[j] * t->grad[j];
    }
    float norm = (float)sqrt(sum);
    float coef = max_norm / (norm + 1e-6f);
    if (coef > 1.0f) coef = 1.0f;
    for (size_t i = 0; i < count; i++) {
        attn_tensor *t = attn_params_at(p, i);
        if (!t->grad) continue;
        for (int64_t j = 0; j < t->numel; j++) t->grad[j] *= coef;
    }
    return norm;
}
