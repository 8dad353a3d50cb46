/* attn tour: what the steps share: the deterministic init, printing, --save, figures, and the
 * one place that hands D2L's valid_lens to the library. */
#include "tour.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- deterministic weights ---- */

void tour_uniform(float *dst, int64_t n, int64_t fan_in, attn_rng *rng)
{
    const float bound = 1.0f / sqrtf((float)fan_in);
    for (int64_t i = 0; i < n; i++) dst[i] = (2.0f * attn_rng_uniform(rng) - 1.0f) * bound;
}

void tour_init_linear(attn_linear_layer *l, attn_rng *rng)
{
    tour_uniform(l->weight->data, l->weight->numel, l->in_features, rng);
    if (l->bias) tour_uniform(l->bias->data, l->bias->numel, l->in_features, rng);
}

void tour_init_mha(attn_mha_layer *m, bool bias, attn_rng *rng)
{
    const int64_t E = m->embed_dim;
    for (int i = 0; i < 3; i++) { /* Wq, Wk, Wv */
        tour_uniform(m->in_proj_weight->data + i * E * E, E * E, E, rng);
        if (bias)
            tour_uniform(m->in_proj_bias->data + i * E, E, E, rng);
        else if (m->in_proj_bias)
            memset(m->in_proj_bias->data + i * E, 0, (size_t)E * sizeof(float));
    }
    tour_uniform(m->out_proj.weight->data, E * E, E, rng); /* fc_out */
    if (bias)
        tour_uniform(m->out_proj.bias->data, E, E, rng);
    else if (m->out_proj.bias)
        memset(m->out_proj.bias->data, 0, (size_t)E * sizeof(float));
}

void tour_keep_mha(tour_run *t, const char *prefix, const attn_mha_layer *m)
{
    static const char *const names[3] = {"Wq", "Wk", "Wv"};
    const int64_t E = m->embed_dim;
    char name[128];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s%s.weight", prefix, names[i]);
        tour_keep_raw(t, name, m->in_proj_weight->data + i * E * E, 2, (int64_t[]){E, E});
        snprintf(name, sizeof name, "%s%s.bias", prefix, names[i]);
        if (m->in_proj_bias) tour_keep_raw(t, name, m->in_proj_bias->data + i * E, 1, &E);
    }
    snprintf(name, sizeof name, "%sfc_out.weight", prefix);
    tour_keep(t, name, m->out_proj.weight);
    snprintf(name, sizeof name, "%sfc_out.bias", prefix);
    if (m->out_proj.bias) tour_keep(t, name, m->out_proj.bias);
}

/* ---- messages and printing ---- */

int tour_fail(const tour_run *t)
{
    int code = cli_fail(CLI_ERR_DATA, "tour", "%s: %s", t->step, attn_last_error());
    attn_clear_error(); /* printed once */
    return code;
}

void tour_print_shape(const char *label, const attn_tensor *x)
{
    char buf[64];
    printf("%s: %s\n", label, attn_shape_str(x, buf, sizeof buf));
}

/* s right-aligned in width terminal columns (a CJK character takes two, as terminals draw it). */
static void print_right(const char *s, int width)
{
    int columns = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80) columns += *p >= 0xe3 && *p <= 0xe9 ? 2 : 1; /* U+3000..U+9FFF */
    printf("%*s%s", width > columns ? width - columns : 0, "", s);
}

void tour_print_matrix(const float *m, int64_t rows, int64_t cols, const char *const *row_labels,
                       const char *const *col_labels)
{
    if (col_labels) {
        printf("%8s", "");
        for (int64_t j = 0; j < cols; j++) print_right(col_labels[j], 9);
        printf("\n");
    }
    for (int64_t i = 0; i < rows; i++) {
        if (row_labels) print_right(row_labels[i], 8);
        for (int64_t j = 0; j < cols; j++) {
            float v = m[i * cols + j];
            printf(" %8.4f", fabsf(v) < 5e-5f ? 0.0f : v); /* no "-0.0000" */
        }
        printf("\n");
    }
}

/* ---- --save ---- */

void tour_keep_raw(tour_run *t, const char *name, const float *data, int ndim, const int64_t *shape)
{
    if (!t->saved || t->save_status != ATTN_OK) return;
    t->save_status = attn_st_writer_add(t->saved, name, ATTN_DTYPE_F32, ndim, shape, data);
}

void tour_keep(tour_run *t, const char *name, const attn_tensor *x)
{
    if (x) tour_keep_raw(t, name, x->data, x->ndim, x->shape);
}

/* ---- figures ---- */

bool tour_figure_path(const tour_run *t, const char *name, char *path, size_t len)
{
    if ((size_t)snprintf(path, len, "%s/%s", t->out_dir, name) < len) return true;
    cli_fail(CLI_ERR_DATA, "tour", "%s: the path %s/%s is too long", t->step, t->out_dir, name);
    return false;
}

int tour_wrote(const tour_run *t, attn_status st, const char *name)
{
    if (st != ATTN_OK) return tour_fail(t);
    TOUR_PRINTF(t, "wrote %s\n", "已写入 %s\n", name);
    return CLI_OK;
}

int tour_heatmap(const tour_run *t, const char *name, const float *m, int64_t rows, int64_t cols,
                 const attn_heatmap_opts *opts)
{
    char path[PATH_MAX];
    if (!tour_figure_path(t, name, path, sizeof path)) return CLI_ERR_DATA;
    return tour_wrote(t, attn_plot_heatmap(path, m, rows, cols, opts), name);
}

int tour_lines(const tour_run *t, const char *name, const attn_series *s, int n, const attn_lineplot_opts *opts)
{
    char path[PATH_MAX];
    if (!tour_figure_path(t, name, path, sizeof path)) return CLI_ERR_DATA;
    return tour_wrote(t, attn_plot_lines(path, s, n, opts), name);
}

/* ---- valid_lens ---- */

attn_tensor *tour_masked_softmax(attn_ctx *ctx, attn_tensor *scores, const int64_t *valid_lens, int ndim)
{
    if (!scores) return NULL;
    const attn_lens lens = {valid_lens, ndim, {scores->shape[0], scores->shape[1]}}; /* (B) or (B, Lq) */
    return attn_masked_softmax(ctx, scores, &lens);
}

attn_tensor *tour_additive_forward(attn_ctx *ctx, const attn_additive_layer *m, attn_tensor *q, attn_tensor *k,
                                   attn_tensor *v, const int64_t *valid_lens, attn_tensor **weights)
{
    if (!q) return NULL;
    const attn_lens lens = {valid_lens, 1, {q->shape[0]}}; /* (B) */
    return attn_additive_forward(ctx, m, q, k, v, &lens, weights);
}

void tour_lens_mask(float *mask, const int64_t *valid_lens, int64_t batch, int64_t lk)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t j = 0; j < lk; j++) mask[b * lk + j] = j < valid_lens[b] ? 0.0f : -INFINITY;
}
