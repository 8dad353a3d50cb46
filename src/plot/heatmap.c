/* Heatmaps of attention weights: one matrix, or a grid of them (one per head or layer) with
 * one colour scale and one colour bar, as D2L's show_heatmaps draws them, or each panel with its
 * own scale and bar, as matplotlib's subplots with a colorbar each. The cells of a panel
 * are one image, a pixel per cell, scaled with the NEAREST filter: a 512 x 512 matrix is one
 * drawing operation and stays sharp. Tick labels are thinned to what fits; every cell is
 * still drawn. Small matrices get their values written in the cells. */
#include "plot_internal.h"

#include "../core/core_internal.h"

#include <math.h>
#include <string.h>

#define HM_CELL_MAX 48.0       /* the largest automatic cell, pixels */
#define HM_BUDGET_SINGLE 560.0 /* automatic map side of one heatmap... */
#define HM_BUDGET_PANEL 320.0  /* ...and of one panel of a grid */
#define HM_GAP 24.0            /* between panels */
#define HM_CBAR_GAP 20.0       /* between the maps and the colour bar */
#define HM_LABEL_MAX_W 160.0   /* longer tick labels are ellipsized */
#define HM_ANNOTATE_MAX 16     /* automatic values in the cells up to 16 x 16 */
#define HM_MAX_PANELS 4096
#define HM_MAX_CELLS                                                                                                   \
    12288                        /* pixels of cells and gaps a picture side holds (a cell is a
                                 * pixel at least), leaving PLOT_MAX_SIDE's rest for the labels
                                 * and the colour bar */
#define HM_GAP_Y (HM_GAP + 32.0) /* between rows of panels, room for their titles */
#define HM_PANEL_BAR                                                                                                   \
    120.0 /* what the size checks count for a panel's own colour bar, its
                                 * gap and its labels */

/* The least pixels `panels` panels of n cells each take along one side, with gap between them. */
static double min_side(int panels, int64_t n, double gap)
{
    return (double)panels * (double)n + (panels - 1) * gap;
}
#define SIN45 0.70710678118654752

typedef struct hm_scale {
    double vmin, vmax; /* the colours' ends */
} hm_scale;

typedef struct hm_figure { /* the request, checked, defaults filled in */
    const char *fn;
    const float *values; /* (grid_rows, grid_cols, rows, cols) */
    int grid_rows, grid_cols;
    int64_t rows, cols;
    const char *const *panel_titles;
    const char *title, *xlabel, *ylabel;
    const char *const *xticks, *const *yticks;
    attn_colormap cmap;
    hm_scale scale;            /* the colour scale (of every panel, unless panel_range) */
    bool panel_range;          /* each panel its own scale and colour bar */
    double data_min, data_max; /* finite values; NaN when there are none */
    int annotate;
    int width, height; /* 0: automatic */
} hm_figure;

typedef struct hm_layout {
    double left, top;    /* panel (0, 0)'s map */
    double map_w, map_h; /* one panel's map, whole pixels */
    double cell_w, cell_h;
    double gap_x; /* between columns of panels, a panel's own colour bar included */
    double gap_y; /* between rows of panels, panel titles included */
    double xdrop; /* height of the rotated x labels */
    double cbar_w;
    int xstep, ystep;  /* every xstep-th column gets a label */
    double annot_size; /* 0: no values in the cells */
    int width, height;
} hm_layout;

/* ---- the request ---- */

/* The smallest and largest finite of v[0..n); NaN when there are none. */
static void finite_range(const float *v, int64_t n, double *lo, double *hi)
{
    *lo = *hi = NAN;
    for (int64_t i = 0; i < n; i++) {
        double x = v[i];
        if (!isfinite(x)) continue;
        if (!(x >= *lo)) *lo = x;
        if (!(x <= *hi)) *hi = x;
    }
}

/* The scale from lo to hi (NaN: no finite value, [0, 1]); one value gets the middle colour and
 * around it a scale that resolves. */
static hm_scale auto_scale(double lo, double hi)
{
    bool any = !isnan(lo);
    hm_scale s = {any ? lo : 0.0, any ? hi : 1.0};
    if (s.vmin == s.vmax) {
        const double half = fmax(0.5, fabs(s.vmin) * 0x1p-10);
        s.vmin -= half;
        s.vmax += half;
    }
    return s;
}

static const float *panel_values(const hm_figure *f, int panel)
{
    return f->values + (int64_t)panel * f->rows * f->cols;
}

static hm_scale panel_scale(const hm_figure *f, int panel)
{
    if (!f->panel_range) return f->scale;
    double lo, hi;
    finite_range(panel_values(f, panel), f->rows * f->cols, &lo, &hi);
    return auto_scale(lo, hi);
}

static attn_status color_scale(hm_figure *f, const attn_heatmap_opts *o)
{
    if (o->auto_range || o->panel_range) { /* (panel_range: each panel's own, drawn from here) */
        f->scale = auto_scale(f->data_min, f->data_max);
        return ATTN_OK;
    }
    f->scale = (hm_scale){o->vmin, o->vmax};
    if (o->vmin == 0.0f && o->vmax == 0.0f) f->scale.vmax = 1.0; /* attention weights */
    if (!(f->scale.vmin < f->scale.vmax) || !isfinite(f->scale.vmax - f->scale.vmin))
        return attn__fail(ATTN_ERR_ARG,
                          "%s: the colour scale needs finite vmin < vmax, got "
                          "vmin %g, vmax %g",
                          f->fn, o->vmin, o->vmax);
    return ATTN_OK;
}

/* The least gap between columns of panels: a panel's own colour bar lies in it. */
static double min_gap_x(const hm_figure *f)
{
    return f->panel_range ? HM_GAP + HM_PANEL_BAR : HM_GAP;
}

static attn_status check_request(hm_figure *f, const attn_heatmap_opts *o)
{
    if (!f->values) return attn__fail(ATTN_ERR_ARG, "%s: values missing", f->fn);
    f->panel_range = o->panel_range;
    if (f->grid_rows < 1 || f->grid_cols < 1 || (int64_t)f->grid_rows * f->grid_cols > HM_MAX_PANELS)
        return attn__fail(ATTN_ERR_ARG,
                          "%s: a grid of %d x %d panels (each side 1 or more, "
                          "%d panels at most)",
                          f->fn, f->grid_rows, f->grid_cols, HM_MAX_PANELS);
    if (f->rows < 1 || f->cols < 1 || f->rows > HM_MAX_CELLS || f->cols > HM_MAX_CELLS ||
        min_side(f->grid_cols, f->cols, min_gap_x(f)) > HM_MAX_CELLS ||
        min_side(f->grid_rows, f->rows, HM_GAP_Y) > HM_MAX_CELLS)
        return attn__fail(ATTN_ERR_ARG,
                          "%s: %d x %d panels of a %lld x %lld matrix: %lld x %lld cells, %.0f x %.0f "
                          "pixels with the gaps between panels at 1 pixel a cell, which no picture of at most %d "
                          "pixels a side holds with its labels; expected at most %d a side",
                          f->fn, f->grid_rows, f->grid_cols, (long long)f->rows, (long long)f->cols,
                          (long long)(f->rows * f->grid_rows), (long long)(f->cols * f->grid_cols),
                          min_side(f->grid_rows, f->rows, HM_GAP_Y), min_side(f->grid_cols, f->cols, min_gap_x(f)),
                          PLOT_MAX_SIDE, HM_MAX_CELLS);
    if ((unsigned)o->cmap > ATTN_CMAP_REDS)
        return attn__fail(ATTN_ERR_ARG, "%s: unknown colour map %d", f->fn, (int)o->cmap);
    if (o->annotate < -1 || o->annotate > 1)
        return attn__fail(ATTN_ERR_ARG, "%s: annotate is -1, 0 or 1, got %d", f->fn, o->annotate);
    if (o->width < 0 || o->height < 0 || o->width > PLOT_MAX_SIDE || o->height > PLOT_MAX_SIDE)
        return attn__fail(ATTN_ERR_ARG, "%s: picture size %d x %d (0 = automatic, at most %d)", f->fn, o->width,
                          o->height, PLOT_MAX_SIDE);
    f->title = o->title;
    f->xlabel = o->xlabel ? o->xlabel : "key";
    f->ylabel = o->ylabel ? o->ylabel : "query";
    f->xticks = o->xticks;
    f->yticks = o->yticks;
    f->cmap = o->cmap;
    f->annotate = o->annotate;
    f->width = o->width;
    f->height = o->height;
    finite_range(f->values, (int64_t)f->grid_rows * f->grid_cols * f->rows * f->cols, &f->data_min, &f->data_max);
    return color_scale(f, o);
}

/* ---- labels ---- */

/* Tick label i of an axis: the caller's text, or the index. */
static const char *tick_text(const char *const *labels, int64_t i, char *buf, size_t len)
{
    if (labels) return labels[i] ? labels[i] : "";
    snprintf(buf, len, "%lld", (long long)i);
    return buf;
}

/* The smallest step of 1, 2, 5, 10, 20, ... that puts labels at least `need` pixels apart. */
static int label_step(double cell, double need)
{
    for (int step = 1, k = 0;; k++) {
        if (step * cell >= need || step >= (1 << 28)) return step;
        step = k % 3 == 1 ? step / 2 * 5 : step * 2; /* 1 2 5 10 20 50 ... */
    }
}

/* Token labels as close as they can be read; index labels (none given) sparser: 2.5 lines apart
 * (as matplotlib spaces its numbers), or the widest number and a line's gap on the x axis. */
static void label_steps(plot_canvas *c, const hm_figure *f, hm_layout *L)
{
    double w, line_h, widest;
    char buf[32];
    attn__plot_text_measure(c, "Ag", PLOT_FONT_TICK, 0, &w, &line_h);
    attn__plot_text_measure(c, tick_text(NULL, f->cols - 1, buf, sizeof buf), PLOT_FONT_TICK, 0, &widest, &w);
    L->ystep = label_step(L->cell_h, (f->yticks ? 1.1 : 2.5) * line_h);
    L->xstep = label_step(L->cell_w, f->xticks ? 1.1 / SIN45 * line_h : fmax(2.5 * line_h, widest + line_h));
}

/* Widest y label; the drop of the lowest x label and how far the first reaches left. */
static void measure_labels(plot_canvas *c, const hm_figure *f, const hm_layout *L, double *ytick_w, double *xdrop,
                           double *xover)
{
    char buf[32];
    double w, h;
    *ytick_w = *xdrop = *xover = 0;
    for (int64_t i = 0; i < f->rows; i += L->ystep) {
        attn__plot_text_measure(c, tick_text(f->yticks, i, buf, sizeof buf), PLOT_FONT_TICK, HM_LABEL_MAX_W, &w, &h);
        *ytick_w = fmax(*ytick_w, w);
    }
    for (int64_t j = 0; j < f->cols; j += L->xstep) {
        attn__plot_text_measure(c, tick_text(f->xticks, j, buf, sizeof buf), PLOT_FONT_TICK, HM_LABEL_MAX_W, &w, &h);
        *xdrop = fmax(*xdrop, f->xticks ? SIN45 * (w + h) : h);
        if (j == 0) *xover = f->xticks ? SIN45 * (w + 0.5 * h) : 0.5 * w;
    }
}

/* Height of a text line plus the pad below it; 0 for no text. */
static double line_height(plot_canvas *c, const char *text, double size)
{
    double h = attn__plot_text_height(c, text, size);
    return h > 0 ? h + PLOT_PAD : 0;
}

/* The automatic cell of n cells a panel, panels of them side by side: within the budget, and
 * never so large that the picture would not fit (every check of the request holds then). */
static double auto_cell(int64_t n, bool grid, int panels, double gap)
{
    double cell = floor((grid ? HM_BUDGET_PANEL : HM_BUDGET_SINGLE) / (double)n);
    double min = grid ? 1.0 : 2.0, fit = floor((HM_MAX_CELLS - (panels - 1) * gap) / ((double)n * panels));
    cell = cell > HM_CELL_MAX ? HM_CELL_MAX : cell < min ? min : cell;
    return cell > fit ? fmax(1.0, fit) : cell;
}

/* ---- layout ---- */

/* Font size of the values in the cells, 0 when they are not written. */
static double annotation_size(plot_canvas *c, const hm_figure *f, const hm_layout *L)
{
    bool small = f->rows <= HM_ANNOTATE_MAX && f->cols <= HM_ANNOTATE_MAX;
    if (f->annotate < 0 || (f->annotate == 0 && !small) || isnan(f->data_min)) return 0;
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%.2f", f->data_min);
    snprintf(hi, sizeof hi, "%.2f", f->data_max);
    double w_lo, w_hi, h;
    attn__plot_text_measure(c, lo, 10.0, 0, &w_lo, &h);
    attn__plot_text_measure(c, hi, 10.0, 0, &w_hi, &h);
    double size = fmin(13.0, fmin(0.42 * L->cell_h, 8.0 * L->cell_w / fmax(w_lo, w_hi)));
    if (f->annotate == 0 && size < 6.0) return 0;
    return fmax(size, 3.0);
}

/* Margins, maps and picture size from the cell size in L (which chooses the labels shown,
 * whose sizes set the margins); ends with the cells' final size. */
static attn_status layout_pass(plot_canvas *c, const hm_figure *f, hm_layout *L)
{
    int gr = f->grid_rows, gc = f->grid_cols;
    label_steps(c, f, L);
    double ytick_w, xover;
    measure_labels(c, f, L, &ytick_w, &L->xdrop, &xover);
    double title_h = line_height(c, f->title, PLOT_FONT_TITLE);
    double ptitle_h = f->panel_titles ? line_height(c, "Ag", PLOT_FONT_LABEL) : 0;
    double xlabel_h = line_height(c, f->xlabel, PLOT_FONT_LABEL);
    double ylabel_h = line_height(c, f->ylabel, PLOT_FONT_LABEL);
    double cbar_lab = 0; /* the widest colour bar's labels */
    for (int p = 0; p < (f->panel_range ? gr * gc : 1); p++) {
        hm_scale s = panel_scale(f, p);
        cbar_lab = fmax(cbar_lab, attn__plot_colorbar_label_width(c, s.vmin, s.vmax));
    }

    L->left = ceil(fmax(PLOT_MARGIN + ylabel_h + ytick_w + PLOT_PAD + PLOT_TICK_LEN + 1.0, PLOT_MARGIN + xover));
    L->top = ceil(PLOT_MARGIN + title_h + ptitle_h);
    L->gap_y = HM_GAP + ptitle_h;
    double bottom = 1.0 + PLOT_TICK_LEN + PLOT_PAD + L->xdrop + PLOT_PAD + xlabel_h + PLOT_MARGIN;
    L->map_h = f->height ? floor((f->height - L->top - bottom - (gr - 1) * L->gap_y) / gr) : f->rows * L->cell_h;
    double maps_h = gr * L->map_h + (gr - 1) * L->gap_y;
    L->cbar_w = fmin(18.0, fmax(10.0, floor((f->panel_range ? L->map_h : maps_h) / 24.0)));
    double bar = HM_CBAR_GAP + L->cbar_w + 1.0 + cbar_lab; /* a colour bar, its gap and labels */
    double right = bar + PLOT_MARGIN;
    L->gap_x = f->panel_range ? bar + HM_GAP : HM_GAP;
    L->map_w = f->width ? floor((f->width - L->left - right - (gc - 1) * L->gap_x) / gc) : f->cols * L->cell_w;
    if (L->map_w < 1 || L->map_h < 1)
        return attn__fail(ATTN_ERR_ARG,
                          "%s: %d x %d pixels leave no room for the cells; "
                          "make the picture larger or pass 0 for automatic",
                          f->fn, f->width, f->height);
    L->cell_w = L->map_w / f->cols;
    L->cell_h = L->map_h / f->rows;
    label_steps(c, f, L);
    L->annot_size = annotation_size(c, f, L);

    double maps_w = gc * L->map_w + (gc - 1) * L->gap_x;
    double title_w = 0, h;
    if (f->title && *f->title) attn__plot_text_measure(c, f->title, PLOT_FONT_TITLE, 0, &title_w, &h);
    L->width = f->width ? f->width : (int)ceil(fmax(L->left + maps_w + right, title_w + 2 * PLOT_MARGIN));
    L->height = f->height ? f->height : (int)ceil(L->top + maps_h + bottom);
    return ATTN_OK;
}

/* Automatic cells are known at once; a given picture size is fitted from a guess, then again
 * with the cells found, so the labels measured are the labels drawn. */
static attn_status layout(plot_canvas *c, const hm_figure *f, hm_layout *L)
{
    bool grid = f->grid_rows * f->grid_cols > 1;
    memset(L, 0, sizeof *L);
    L->cell_w = f->width ? fmax(0.5, (f->width - 200.0) / (f->grid_cols * (double)f->cols))
                         : auto_cell(f->cols, grid, f->grid_cols, min_gap_x(f));
    L->cell_h = f->height ? fmax(0.5, (f->height - 150.0) / (f->grid_rows * (double)f->rows))
                          : auto_cell(f->rows, grid, f->grid_rows, HM_GAP_Y);
    attn_status s = layout_pass(c, f, L);
    if (s == ATTN_OK && (f->width || f->height)) s = layout_pass(c, f, L);
    return s;
}

/* ---- drawing ---- */

/* Pixels per cell of the cell image: 1 for PNG, scaled without smoothing; for SVG and PDF,
 * whose viewers may smooth images, about the cell's size (at most 2048 pixels a side). */
static int cell_pixels(const plot_canvas *c, double cell, int64_t n)
{
    if (c->format == PLOT_PNG) return 1;
    double k = fmin(round(cell), floor(2048.0 / (double)n));
    return k < 1 ? 1 : (int)k;
}

/* One panel's cells as an image, kx x ky pixels per cell; NULL when out of memory. */
static cairo_surface_t *cell_image(const hm_figure *f, const float *m, hm_scale sc, int kx, int ky)
{
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)f->cols * kx, (int)f->rows * ky);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return NULL;
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int64_t r = 0; r < f->rows; r++) {
        uint32_t *row = (uint32_t *)(data + (size_t)r * ky * stride);
        for (int64_t j = 0; j < f->cols; j++) {
            double rgb[3];
            attn__plot_cmap_rgb(f->cmap, (m[r * f->cols + j] - sc.vmin) / (sc.vmax - sc.vmin), rgb);
            uint32_t px = attn__plot_rgb_pixel(rgb);
            for (int k = 0; k < kx; k++) row[j * kx + k] = px;
        }
        for (int k = 1; k < ky; k++) /* repeat the row */
            memcpy(data + ((size_t)r * ky + k) * stride, row, (size_t)f->cols * kx * 4);
    }
    cairo_surface_mark_dirty(img);
    return img;
}

static attn_status draw_cells(plot_canvas *c, const hm_figure *f, const hm_layout *L, const float *m, hm_scale sc,
                              double x0, double y0)
{
    int kx = cell_pixels(c, L->cell_w, f->cols), ky = cell_pixels(c, L->cell_h, f->rows);
    cairo_surface_t *img = cell_image(f, m, sc, kx, ky);
    if (!img)
        return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory for a %lld x %lld image", f->fn, (long long)f->rows,
                          (long long)f->cols);
    cairo_t *cr = c->cr;
    cairo_save(cr);
    cairo_rectangle(cr, x0, y0, L->map_w, L->map_h);
    cairo_clip(cr);
    cairo_translate(cr, x0, y0);
    cairo_scale(cr, L->cell_w / kx, L->cell_h / ky);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    return ATTN_OK;
}

static void draw_annotations(plot_canvas *c, const hm_figure *f, const hm_layout *L, const float *m, hm_scale sc,
                             double x0, double y0)
{
    for (int64_t r = 0; r < f->rows; r++)
        for (int64_t j = 0; j < f->cols; j++) {
            double v = m[r * f->cols + j], rgb[3];
            if (isnan(v)) continue;
            char label[32];
            snprintf(label, sizeof label, "%.2f", fabs(v) < 0.005 ? 0.0 : v); /* no "-0.00" */
            attn__plot_cmap_rgb(f->cmap, (v - sc.vmin) / (sc.vmax - sc.vmin), rgb);
            double ink = attn__plot_rgb_is_dark(rgb) ? 1.0 : 0.0;
            cairo_set_source_rgb(c->cr, ink, ink, ink);
            attn__plot_text(c, label, L->annot_size, x0 + (j + 0.5) * L->cell_w, y0 + (r + 0.5) * L->cell_h, 0, 0.5,
                            0.5);
        }
}

static void draw_yticks(plot_canvas *c, const hm_figure *f, const hm_layout *L, double x0, double y0)
{
    cairo_t *cr = c->cr;
    char buf[32];
    for (int64_t i = 0; i < f->rows; i += L->ystep) {
        double py = y0 + (i + 0.5) * L->cell_h;
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x0 - 1.0, floor(py) + 0.5);
        cairo_line_to(cr, x0 - 1.0 - PLOT_TICK_LEN, floor(py) + 0.5);
        cairo_stroke(cr);
        attn__plot_text_set(c, tick_text(f->yticks, i, buf, sizeof buf), PLOT_FONT_TICK, HM_LABEL_MAX_W);
        attn__plot_text_draw(c, x0 - 1.0 - PLOT_TICK_LEN - PLOT_PAD, py, 0, 1.0, 0.5);
    }
    if (f->ylabel && *f->ylabel)
        attn__plot_text(c, f->ylabel, PLOT_FONT_LABEL, PLOT_MARGIN, y0 + 0.5 * L->map_h, 90, 0.5, 0);
}

/* Token labels at 45 degrees, their right ends at the ticks; indices level, centred. */
static void draw_xticks(plot_canvas *c, const hm_figure *f, const hm_layout *L, double x0, double y0)
{
    cairo_t *cr = c->cr;
    char buf[32];
    double base = y0 + L->map_h + 1.0 + PLOT_TICK_LEN + PLOT_PAD;
    for (int64_t j = 0; j < f->cols; j += L->xstep) {
        double px = x0 + (j + 0.5) * L->cell_w, w, h;
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, floor(px) + 0.5, y0 + L->map_h + 1.0);
        cairo_line_to(cr, floor(px) + 0.5, y0 + L->map_h + 1.0 + PLOT_TICK_LEN);
        cairo_stroke(cr);
        attn__plot_text_set(c, tick_text(f->xticks, j, buf, sizeof buf), PLOT_FONT_TICK, HM_LABEL_MAX_W);
        attn__plot_text_extent(c, &w, &h);
        if (f->xticks)
            attn__plot_text_draw(c, px, base + SIN45 * 0.5 * h, 45, 1.0, 0.5);
        else
            attn__plot_text_draw(c, px, base, 0, 0.5, 0);
    }
    if (f->xlabel && *f->xlabel)
        attn__plot_text(c, f->xlabel, PLOT_FONT_LABEL, x0 + 0.5 * L->map_w, base + L->xdrop + PLOT_PAD, 0, 0.5, 0);
}

static attn_status draw_panel(plot_canvas *c, const hm_figure *f, const hm_layout *L, int gi, int gj)
{
    int panel = gi * f->grid_cols + gj;
    const float *m = panel_values(f, panel);
    hm_scale sc = panel_scale(f, panel);
    double x0 = L->left + gj * (L->map_w + L->gap_x), y0 = L->top + gi * (L->map_h + L->gap_y);
    attn_status s = draw_cells(c, f, L, m, sc, x0, y0);
    if (s != ATTN_OK) return s;
    if (L->annot_size > 0) draw_annotations(c, f, L, m, sc, x0, y0);
    attn__plot_frame(c, x0, y0, L->map_w, L->map_h);
    if (f->panel_range)
        attn__plot_colorbar(c, x0 + L->map_w + HM_CBAR_GAP, y0, L->cbar_w, L->map_h, f->cmap, sc.vmin, sc.vmax);
    cairo_set_source_rgb(c->cr, 0, 0, 0);
    if (f->panel_titles && f->panel_titles[panel])
        attn__plot_text(c, f->panel_titles[panel], PLOT_FONT_LABEL, x0 + 0.5 * L->map_w, y0 - PLOT_PAD, 0, 0.5, 1.0);
    if (gj == 0) draw_yticks(c, f, L, x0, y0);
    if (gi == f->grid_rows - 1) draw_xticks(c, f, L, x0, y0);
    return ATTN_OK;
}

static void draw_title(plot_canvas *c, const hm_figure *f, const hm_layout *L)
{
    if (!f->title || !*f->title) return;
    double w, h;
    attn__plot_text_measure(c, f->title, PLOT_FONT_TITLE, 0, &w, &h);
    double maps_w = f->grid_cols * L->map_w + (f->grid_cols - 1) * L->gap_x;
    double cx = L->left + 0.5 * maps_w;
    cx = fmin(fmax(cx, PLOT_MARGIN + 0.5 * w), L->width - PLOT_MARGIN - 0.5 * w);
    cairo_set_source_rgb(c->cr, 0, 0, 0);
    attn__plot_text_draw(c, cx, PLOT_MARGIN, 0, 0.5, 0);
}

static attn_status draw_figure(plot_canvas *c, const hm_figure *f, const hm_layout *L)
{
    attn_status s = ATTN_OK;
    for (int gi = 0; gi < f->grid_rows && s == ATTN_OK; gi++)
        for (int gj = 0; gj < f->grid_cols && s == ATTN_OK; gj++) s = draw_panel(c, f, L, gi, gj);
    if (s != ATTN_OK) return s;
    double maps_w = f->grid_cols * L->map_w + (f->grid_cols - 1) * L->gap_x;
    double maps_h = f->grid_rows * L->map_h + (f->grid_rows - 1) * L->gap_y;
    if (!f->panel_range)
        attn__plot_colorbar(c, L->left + maps_w + HM_CBAR_GAP, L->top, L->cbar_w, maps_h, f->cmap, f->scale.vmin,
                            f->scale.vmax);
    draw_title(c, f, L);
    return ATTN_OK;
}

static attn_status heatmap(hm_figure *f, const char *path, const attn_heatmap_opts *opts)
{
    static const attn_heatmap_opts defaults = {0};
    attn_status s = check_request(f, opts ? opts : &defaults);
    if (s != ATTN_OK) return s;
    plot_canvas c;
    hm_layout L;
    s = attn__plot_canvas_open(&c, f->fn, path);
    if (s == ATTN_OK) s = layout(&c, f, &L);
    if (s == ATTN_OK) s = attn__plot_canvas_start(&c, L.width, L.height);
    if (s == ATTN_OK) s = draw_figure(&c, f, &L);
    return attn__plot_canvas_close(&c, s);
}

attn_status attn_plot_heatmap(const char *path, const float *values, int64_t rows, int64_t cols,
                              const attn_heatmap_opts *opts)
{
    hm_figure f = {
        .fn = "attn_plot_heatmap", .values = values, .grid_rows = 1, .grid_cols = 1, .rows = rows, .cols = cols};
    return heatmap(&f, path, opts);
}

attn_status attn_plot_heatmap_grid(const char *path, const float *values, int grid_rows, int grid_cols, int64_t rows,
                                   int64_t cols, const char *const *panel_titles, const attn_heatmap_opts *opts)
{
    hm_figure f = {.fn = "attn_plot_heatmap_grid",
                   .values = values,
                   .grid_rows = grid_rows,
                   .grid_cols = grid_cols,
                   .rows = rows,
                   .cols = cols,
                   .panel_titles = panel_titles};
    return heatmap(&f, path, opts);
}

attn_status attn_plot_heatmap_heads(const char *path, const float *values, int64_t panels, int64_t rows, int64_t cols,
                                    const char *const *panel_titles, const attn_heatmap_opts *opts)
{
    if (panels < 1 || panels > HM_MAX_PANELS)
        return attn__fail(ATTN_ERR_ARG, "attn_plot_heatmap_heads: %lld panels; expected 1 to %d", (long long)panels,
                          HM_MAX_PANELS);
    const int n = (int)panels, grid_cols = n >= 4 && n % 2 == 0 ? n / 2 : n, grid_rows = n / grid_cols;
    char(*store)[24] = panel_titles ? NULL : malloc((size_t)n * sizeof *store);
    const char **titles = panel_titles ? NULL : malloc((size_t)n * sizeof *titles);
    if (!panel_titles && (!store || !titles)) {
        free(store), free(titles);
        return attn__fail(ATTN_ERR_NOMEM, "attn_plot_heatmap_heads: out of memory");
    }
    for (int i = 0; titles && i < n; i++) snprintf(store[i], sizeof store[i], "head %d", i + 1), titles[i] = store[i];
    attn_status s = attn_plot_heatmap_grid(path, values, grid_rows, grid_cols, rows, cols,
                                           panel_titles ? panel_titles : titles, opts);
    free(store), free(titles);
    return s;
}
