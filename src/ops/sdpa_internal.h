/* Private to src/ops: what attn_sdpa and attn_sdpa_varlen share in setting up a problem. */
#ifndef ATTN_OPS_SDPA_INTERNAL_H
#define ATTN_OPS_SDPA_INTERNAL_H

#include "../core/core_internal.h"
#include "../kernels/attention_internal.h"

/* The score and mask callbacks m into p, after checking that the backward will have what it
 * needs (grads: q, k or v needs a gradient); op names the caller in messages. */
attn_status attn__sdpa_prepare_mods(sdpa_problem *p, const attn_score_mods *m, bool grads, const char *op);

/* The window's bounds (>= -1) and softcap (0, or a normal float32: a denormal's reciprocal
 * overflows) of attn_sdpa's and attn_sdpa_varlen's options; op names the caller in messages. */
attn_status attn__sdpa_check_features(const attn_window *w, float softcap, const char *op);

#endif
