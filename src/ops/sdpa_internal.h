/* Private to src/ops: what attn_sdpa and attn_sdpa_varlen share in setting up a problem. */
#ifndef ATTN_OPS_SDPA_INTERNAL_H
#define ATTN_OPS_SDPA_INTERNAL_H

#include "../core/core_internal.h"
#include "../kernels/attention_internal.h"

/* The score features f (window, softcap, the callbacks, ALiBi) into p after checking them, for
 * attn_sdpa, attn_sdpa_varlen and, through them, the multi-head layers: the window's bounds
 * (>= -1), softcap (0, or a normal float32: a denormal's reciprocal overflows), callbacks the
 * backward can run (grads: q, k or v needs a gradient), ALiBi's slopes of shape (H) or
 * (p->batch, H), finite, copied into the arena (p->alibi_batch_stride H for (B, H) slopes). op
 * names the caller in messages. */
/* The options sdpa and sdpa_varlen share: dropout_p in [0, 1], a finite scale >= 0 and a known
 * impl; op names the caller in messages. */
attn_status attn__sdpa_check_opts(float dropout_p, float scale, attn_sdpa_impl impl, const char *op);
attn_status attn__sdpa_prepare_features(attn_ctx *ctx, sdpa_problem *p, const attn_score_features *f, bool grads,
                                        const char *op);

#endif
