/* Positional encodings: the sinusoidal table (interleaved as in the paper and D2L, or
 * concatenated halves) and seed 002's learned (1, max_len, E) parameter. */
#include "../core/core_internal.h"

#include <math.h>

attn_tensor *attn_sinusoidal_table(attn_ctx *ctx, int64_t max_len, int64_t d, attn_pe_layout layout)
{
    if (!ctx) return attn__null_input(__func__);
    if (max_len < 1 || d < 2 || d % 2 || (layout != ATTN_PE_INTERLEAVED && layout != ATTN_PE_CONCATENATED))
        return attn__fail_null(ATTN_ERR_ARG,
                               "sinusoidal_table: max_len %lld, d %lld and layout %d; expected max_len "
                               ">= 1, an even d >= 2 and ATTN_PE_INTERLEAVED or ATTN_PE_CONCATENATED",
                               (long long)max_len, (long long)d, (int)layout);
    attn_tensor *t = attn_tensor_empty(ctx, 2, (int64_t[]){max_len, d});
    if (!t) return NULL;
    for (int64_t i = 0; i < max_len; i++)
        for (int64_t j = 0; j < d / 2; j++) {
            double angle = (double)i / pow(10000.0, 2.0 * (double)j / (double)d);
            int64_t at_sin = layout == ATTN_PE_INTERLEAVED ? 2 * j : j;
            int64_t at_cos = layout == ATTN_PE_INTERLEAVED ? 2 * j + 1 : d / 2 + j;
            t->data[i * d + at_sin] = (float)sin(angle);
            t->data[i * d + at_cos] = (float)cos(angle);
        }
    return t;
}

attn_tensor *attn_add_positions(attn_ctx *ctx, attn_tensor *x, attn_tensor *table)
{
    if (!ctx || !x || !table) return attn__null_input(__func__);
    if (x->ndim != 3 || table->ndim != 2 || table->shape[1] != x->shape[2] || table->shape[0] < x->shape[1]) {
        char a[64], b[64];
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "add_positions: x %s and table %s; expected x (B, L, E) and a table "
                               "(max_len >= L, E)",
                               attn_shape_str(x, a, 64), attn_shape_str(table, b, 64));
    }
    return attn_add(ctx, x, attn_narrow(ctx, table, 0, 0, x->shape[1]));
}

attn_status attn_learned_pe_init(attn_learned_pe *m, attn_params *p, const char *name, int64_t max_len, int64_t dim,
                                 attn_rng *rng)
{
    if (!m || !p || !name) return attn__fail(ATTN_ERR_ARG, "learned_pe_init: NULL argument");
    if (max_len < 1 || dim < 1)
        return attn__fail(ATTN_ERR_ARG, "learned_pe_init: max_len %lld and dim %lld; expected >= 1", (long long)max_len,
                          (long long)dim);
    m->table = attn_params_add(p, name, 3, (int64_t[]){1, max_len, dim});
    if (!m->table) return attn_last_status();
    if (rng) attn_tensor_fill_normal(m->table, rng, 0.0f, 1.0f);
    return ATTN_OK;
}

attn_tensor *attn_learned_pe_forward(attn_ctx *ctx, const attn_learned_pe *m, attn_tensor *x)
{
    if (!ctx || !m || !x) return attn__null_input(__func__);
    if (x->ndim != 3 || x->shape[2] != m->table->shape[2] || x->shape[1] > m->table->shape[1]) {
        char a[64], b[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "learned_pe: x %s does not fit the table %s (L must be <= max_len)",
                               attn_shape_str(x, a, 64), attn_shape_str(m->table, b, 64));
    }
    return attn_add(ctx, x, attn_narrow(ctx, m->table, 1, 0, x->shape[1]));
}
