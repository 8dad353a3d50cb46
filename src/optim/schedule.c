/* Learning-rate schedules (step counted from 1; a step below 1 is taken as 1), in double:
 *   constant:       base_lr
 *   linear warmup:  base_lr * min(1, step / warmup)                (warmup <= 0: base_lr)
 *   inverse sqrt:   base_lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *                   (Vaswani et al. 2017; warmup <= 0: the step^-0.5 branch alone)
 *   custom:         fn(step, user)
 * A schedule that cannot be evaluated gives NaN and records ATTN_ERR_ARG. */
#include "../core/core_internal.h"

#include <math.h>

static float bad_schedule(const char *why)
{
    attn__fail(ATTN_ERR_ARG, "attn_lr_at: %s", why);
    return NAN;
}

static double inv_sqrt(const attn_lr_schedule *s, double step)
{
    double decay = 1.0 / sqrt(step);
    if (s->warmup_steps > 0) {
        double warm = step * pow((double)s->warmup_steps, -1.5);
        decay = warm < decay ? warm : decay;
    }
    return (double)s->base_lr / sqrt((double)s->d_model) * decay;
}

float attn_lr_at(const attn_lr_schedule *s, int64_t step)
{
    if (!s) return bad_schedule("schedule is NULL");
    if (step < 1) step = 1;
    switch (s->kind) {
    case ATTN_LR_CONSTANT:
        return s->base_lr;
    case ATTN_LR_LINEAR_WARMUP:
        if (s->warmup_steps <= 0 || step >= s->warmup_steps) return s->base_lr;
        return (float)((double)s->base_lr * (double)step / (double)s->warmup_steps);
    case ATTN_LR_INV_SQRT:
        if (s->d_model < 1) return bad_schedule("inverse-sqrt schedule needs d_model >= 1");
        return (float)inv_sqrt(s, (double)step);
    case ATTN_LR_CUSTOM:
        if (!s->fn) return bad_schedule("custom schedule without a function");
        return s->fn(step, s->user);
    }
    return bad_schedule("unknown schedule kind");
}
