/* Private: rope.c's two steps, for the cached decoder (models/lm_decode_step.c), which rotates
 * one token's heads at a time and keeps the table of its whole capacity. */
#ifndef ATTN_OPS_ROPE_H
#define ATTN_OPS_ROPE_H

#include "../core/core_internal.h"

/* cs (n_pos, rot / 2, 2): cos and sin of theta_i = pos base^(-2i / rot) for pos = positions[p]
 * (p when positions is NULL; each >= 0), computed in double and rounded once */
void attn__rope_table(float *cs, const int64_t *positions, int64_t n_pos, int64_t rot, float base);
/* One row x (d) of one position's cs (rot / 2, 2): y = R(theta) x, or R(-theta) when inverse; y may be x */
void attn__rope_rotate_row(float *y, const float *x, const float *cs, int64_t d, int64_t rot, attn_rope_layout layout,
                           bool inverse);

#endif
