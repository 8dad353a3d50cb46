/* attn_plot.h - the header of libattn_plot (pkg-config attn-plot; find_package(attn
 * COMPONENTS plot): attn::plot): pictures of attention weights and training curves, drawn with
 * cairo and Pango into PNG, SVG or PDF files.
 * Conventions, errors and ownership as in attn.h, which this header includes. */
#ifndef ATTN_PLOT_H
#define ATTN_PLOT_H

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Plots (cairo + Pango): attention heatmaps, grids of heads, line and scatter plots.
 * The format follows path's extension: .png, .svg or .pdf, in any case; another extension is
 * ATTN_ERR_ARG and a path that cannot be written ATTN_ERR_IO, the message naming the path.
 * The file appears complete or not at all (see "Output files" in attn.h). Text is
 * UTF-8 drawn as it is (no markup), Chinese with WenQuanYi Zen Hei; SVG files also carry every
 * text as invisible <text>, so they can be searched. Sizes are pixels (points in SVG and PDF).
 * ====================================================================================== */

/* ATTN_OK when path has a picture extension (.png, .svg, .pdf in any case: else ATTN_ERR_ARG)
 * and could be written now (attn_output_check): for checking an option before a long run. */
ATTN_API attn_status attn_plot_path_check(const char *path);

typedef enum attn_colormap {
    ATTN_CMAP_VIRIDIS = 0, /* matplotlib's default: dark purple (low) to yellow (high) */
    ATTN_CMAP_REDS,        /* white (low) to dark red (high), as D2L's show_heatmaps */
} attn_colormap;

typedef struct attn_heatmap_opts {
    const char *title;           /* above the picture; NULL: none */
    const char *xlabel, *ylabel; /* axis titles; NULL: "key" and "query"; "": none */
    const char *const *xticks;   /* one label per column, drawn at 45 degrees, or NULL: column
                                    numbers, level; labels are thinned to what fits */
    const char *const *yticks;   /* one label per row, or NULL */
    attn_colormap cmap;
    bool auto_range;   /* colour scale from the smallest to the largest finite value */
    float vmin, vmax;  /* otherwise this scale; both 0: [0, 1], for attention weights.
                                    Values outside take the end colours; NaN cells are grey */
    int annotate;      /* values in the cells: 0 when the matrix is at most 16 x 16
                                    (and cells are large enough), 1 always, -1 never */
    int width, height; /* the picture; 0: from the matrix size (up to 48 px a cell) */
    bool panel_range;  /* a grid: each panel its own scale, from its smallest to its
                                    largest finite value, and its own colour bar beside it (as
                                    matplotlib's subplots with a colorbar each); auto_range,
                                    vmin and vmax are then unused */
} attn_heatmap_opts;

/* values (rows, cols), row = query, column = key; opts NULL means defaults. */
ATTN_API attn_status attn_plot_heatmap(const char *path, const float *values, int64_t rows, int64_t cols,
                                       const attn_heatmap_opts *opts);
/* values (grid_rows, grid_cols, rows, cols): one panel per matrix (e.g. layers x heads), one
 * colour scale (auto_range spans every panel) and one colour bar, or with panel_range one of
 * each per panel; panel_titles has
 * grid_rows * grid_cols entries (NULL entries: none) or is NULL. opts->title goes above the
 * grid; y labels on the left column, x labels under the bottom row. */
ATTN_API attn_status attn_plot_heatmap_grid(const char *path, const float *values, int grid_rows, int grid_cols,
                                            int64_t rows, int64_t cols, const char *const *panel_titles,
                                            const attn_heatmap_opts *opts);

/* values (panels, rows, cols), one panel per head (or layer), as attn_plot_heatmap_grid draws them:
 * up to 3 panels in one row; from 4, an even count in two rows of panels / 2, an odd count in one
 * row, so every panel is drawn. panel_titles has `panels` entries, or is NULL: "head 1",
 * "head 2", ... ATTN_ERR_ARG for panels < 1. */
ATTN_API attn_status attn_plot_heatmap_heads(const char *path, const float *values, int64_t panels, int64_t rows,
                                             int64_t cols, const char *const *panel_titles,
                                             const attn_heatmap_opts *opts);

/* An opaque colour for attn_series.color. */
#define ATTN_RGB(r, g, b) (0xff000000u | ((uint32_t)(r) << 16) | ((uint32_t)(g) << 8) | (uint32_t)(b))

typedef struct attn_series {
    const char *label; /* legend text; NULL: not in the legend */
    const float *x;    /* (n), or NULL: 1, 2, ..., n (epochs) */
    const float *y;    /* (n); NaN and Inf (and y <= 0 on a log axis) are left out,
                                breaking the line there */
    int64_t n;
    bool scatter;   /* a dot per point, no line */
    bool dashed;    /* a dashed line (e.g. the true function) */
    uint32_t color; /* ATTN_RGB(r, g, b), or 0: the next of matplotlib's colours */
} attn_series;

typedef struct attn_lineplot_opts {
    const char *title, *xlabel, *ylabel; /* NULL: none */
    bool log_y;                          /* logarithmic y axis (loss curves) */
    float xlim[2], ylim[2];              /* axis ranges; equal values: from the data, + 5% */
    int width, height;                   /* 0: 640 x 480 */
} attn_lineplot_opts;

/* Lines and points on one pair of axes, with a grid and, when any series has a label, a
 * legend in the corner that hides the fewest points. opts NULL means defaults. */
ATTN_API attn_status attn_plot_lines(const char *path, const attn_series *series, int n_series,
                                     const attn_lineplot_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_PLOT_H */
