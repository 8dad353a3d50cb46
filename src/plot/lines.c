/* Line and scatter plots on one pair of axes, in matplotlib's default look: the NW fit
 * (training points, true function, prediction) and loss or accuracy curves. A light grid at
 * the ticks, an optional log y axis (decades labelled, 2..9 marked), and a legend in the
 * corner of the axes that hides the fewest points. */
#include "plot_internal.h"

#include "../core/core_internal.h"

#include <math.h>
#include <string.h>

#define LN_WIDTH 640 /* default picture, matplotlib's 6.4 x 4.8 in at 100 dpi */
#define LN_HEIGHT 480
#define LN_LINE_W 1.5
#define LN_DOT_R 3.0
#define LN_RIGHT 15.0       /* right of the axes: room for half the last x label */
#define LN_LEGEND_INSET 8.0 /* legend to axes frame */
#define LN_LEGEND_PAD 6.0
#define LN_LEGEND_HANDLE 28.0 /* the line sample in the legend */
#define LN_CLAMP 1e6          /* pixel coordinates stay within this, far outside any picture */
#define LN_MAX_SERIES 4096

/* matplotlib's default colour cycle (tab10) */
static const uint32_t tab10[10] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                   0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};

typedef struct ln_axis {
    double lo, hi; /* the data range shown */
    bool log;
    plot_ticks major, minor;
    double p0, p1; /* pixel positions of lo and hi */
} ln_axis;

typedef struct ln_plot {
    const char *fn;
    const attn_series *series;
    int n_series;
    const char *title, *xlabel, *ylabel;
    ln_axis x, y;
    double ax, ay, aw, ah; /* the axes box, whole pixels */
    int width, height;
} ln_plot;

typedef struct ln_legend {
    double x, y, w, h, row_h;
    int n; /* entries: series with a label */
} ln_legend;

/* ---- data ---- */

/* Point i of series s in data units; false when it is not drawn (not finite, or y <= 0 on a
 * log axis). */
static bool data_point(const ln_plot *p, const attn_series *s, int64_t i, double *x, double *y)
{
    *x = s->x ? s->x[i] : (double)(i + 1);
    *y = s->y[i];
    return isfinite(*x) && isfinite(*y) && (!p->y.log || *y > 0);
}

static double axis_px(const ln_axis *a, double v)
{
    double f = a->log ? log10(v) : v;
    double f0 = a->log ? log10(a->lo) : a->lo, f1 = a->log ? log10(a->hi) : a->hi;
    double px = a->p0 + (f - f0) / (f1 - f0) * (a->p1 - a->p0);
    return fmin(fmax(px, -LN_CLAMP), LN_CLAMP);
}

static bool pixel_point(const ln_plot *p, const attn_series *s, int64_t i, double *px, double *py)
{
    double x, y;
    if (!data_point(p, s, i, &x, &y)) return false;
    *px = axis_px(&p->x, x);
    *py = axis_px(&p->y, y);
    return true;
}

static void series_rgb(const ln_plot *p, int k, double rgb[3])
{
    uint32_t color = p->series[k].color;
    if (color == 0) {
        int auto_index = 0;
        for (int i = 0; i < k; i++) auto_index += p->series[i].color == 0;
        color = tab10[auto_index % 10];
    }
    for (int c = 0; c < 3; c++) rgb[c] = ((color >> (16 - 8 * c)) & 0xff) / 255.0;
}

/* lo..hi from the finite data (NaN when none) or the caller's limits, plus 5% each side. */
static void axis_range(ln_axis *a, double dmin, double dmax, const float lim[2])
{
    if (lim[0] != lim[1]) {
        a->lo = lim[0];
        a->hi = lim[1];
        return;
    }
    if (isnan(dmin)) {
        dmin = a->log ? 1.0 : 0.0;
        dmax = a->log ? 10.0 : 1.0;
    }
    if (a->log) {
        dmin = log10(dmin);
        dmax = log10(dmax);
    }
    if (dmin == dmax) {
        double d = dmin != 0 ? 0.05 * fabs(dmin) : 0.5;
        dmin -= d;
        dmax += d;
    }
    double m = 0.05 * (dmax - dmin);
    a->lo = a->log ? pow(10.0, dmin - m) : dmin - m;
    a->hi = a->log ? pow(10.0, dmax + m) : dmax + m;
}

static void data_ranges(ln_plot *p, const attn_lineplot_opts *o)
{
    double xmin = NAN, xmax = NAN, ymin = NAN, ymax = NAN;
    for (int k = 0; k < p->n_series; k++)
        for (int64_t i = 0; i < p->series[k].n; i++) {
            double x, y;
            if (!data_point(p, &p->series[k], i, &x, &y)) continue;
            if (!(x >= xmin)) xmin = x;
            if (!(x <= xmax)) xmax = x;
            if (!(y >= ymin)) ymin = y;
            if (!(y <= ymax)) ymax = y;
        }
    axis_range(&p->x, xmin, xmax, o->xlim);
    axis_range(&p->y, ymin, ymax, o->ylim);
}

/* ---- the request ---- */

static attn_status check_limits(const ln_plot *p, const float lim[2], bool log, const char *name)
{
    if (lim[0] == lim[1]) return ATTN_OK;
    if (!(lim[0] < lim[1]) || !isfinite(lim[1] - lim[0]) || (log && !(lim[0] > 0)))
        return attn__fail(ATTN_ERR_ARG, "%s: %s = [%g, %g]: needs finite lo < hi with a finite hi - lo%s", p->fn, name,
                          lim[0], lim[1], log ? " and lo > 0 (log axis)" : "");
    return ATTN_OK;
}

static attn_status check_request(const ln_plot *p, const attn_lineplot_opts *o)
{
    if (!p->series || p->n_series < 1 || p->n_series > LN_MAX_SERIES)
        return attn__fail(ATTN_ERR_ARG, "%s: %d series (1..%d needed)", p->fn, p->n_series, LN_MAX_SERIES);
    for (int k = 0; k < p->n_series; k++) {
        const attn_series *s = &p->series[k];
        if (s->n < 0 || (s->n > 0 && !s->y))
            return attn__fail(ATTN_ERR_ARG, "%s: series %d: n = %lld, y %s", p->fn, k, (long long)s->n,
                              s->y ? "given" : "missing");
    }
    if (o->width < 0 || o->height < 0 || o->width > PLOT_MAX_SIDE || o->height > PLOT_MAX_SIDE)
        return attn__fail(ATTN_ERR_ARG, "%s: picture size %d x %d (0 = automatic, at most %d)", p->fn, o->width,
                          o->height, PLOT_MAX_SIDE);
    attn_status s = check_limits(p, o->xlim, false, "xlim");
    return s != ATTN_OK ? s : check_limits(p, o->ylim, o->log_y, "ylim");
}

/* ---- layout ---- */

static double widest_label(plot_canvas *c, const plot_ticks *t)
{
    double widest = 0, w, h;
    for (int i = 0; i < t->n; i++) {
        char label[64];
        attn__plot_tick_label(label, sizeof label, t, t->v[i]);
        attn__plot_text_measure(c, label, PLOT_FONT_TICK, 0, &w, &h);
        widest = fmax(widest, w);
    }
    return widest;
}

static void axis_ticks(ln_axis *a, double length, double min_spacing)
{
    if (a->log) {
        attn__plot_ticks_log(&a->major, &a->minor, a->lo, a->hi);
        return;
    }
    int max_ticks = (int)(length / min_spacing);
    attn__plot_ticks_linear(&a->major, a->lo, a->hi, max_ticks < 3 ? 3 : max_ticks > 9 ? 9 : max_ticks);
    a->minor.n = 0;
}

/* As many x ticks as fit side by side without their labels touching (at least 3). */
static void x_ticks(plot_canvas *c, ln_axis *a, double length)
{
    double spacing = 70.0;
    axis_ticks(a, length, spacing);
    while (a->major.n > 3 && a->major.n * (widest_label(c, &a->major) + 12.0) > length) {
        spacing *= 1.25;
        axis_ticks(a, length, spacing);
    }
}

static attn_status layout(plot_canvas *c, ln_plot *p)
{
    double tick_h = attn__plot_text_height(c, "0", PLOT_FONT_TICK);
    double title_h = attn__plot_text_height(c, p->title, PLOT_FONT_TITLE);
    double xlabel_h = attn__plot_text_height(c, p->xlabel, PLOT_FONT_LABEL);
    double ylabel_h = attn__plot_text_height(c, p->ylabel, PLOT_FONT_LABEL);
    p->ay = ceil(PLOT_MARGIN + (title_h > 0 ? title_h + PLOT_PAD : 0.5 * tick_h));
    double bottom = 1.0 + PLOT_TICK_LEN + PLOT_PAD + tick_h + (xlabel_h > 0 ? PLOT_PAD : 0) + xlabel_h + PLOT_MARGIN;
    p->ah = floor(p->height - p->ay - bottom);
    axis_ticks(&p->y, p->ah, 45.0);
    double left = PLOT_MARGIN + (ylabel_h > 0 ? ylabel_h + PLOT_PAD : 0) + widest_label(c, &p->y.major) + PLOT_PAD +
                  PLOT_TICK_LEN + 1.0;
    p->ax = ceil(left);
    p->aw = floor(p->width - p->ax - LN_RIGHT - PLOT_MARGIN);
    if (p->aw < 16 || p->ah < 16)
        return attn__fail(ATTN_ERR_ARG, "%s: %d x %d pixels leave no room for the axes", p->fn, p->width, p->height);
    x_ticks(c, &p->x, p->aw);
    p->x.p0 = p->ax;
    p->x.p1 = p->ax + p->aw;
    p->y.p0 = p->ay + p->ah;
    p->y.p1 = p->ay;
    return ATTN_OK;
}

/* ---- drawing ---- */

static void draw_grid(plot_canvas *c, const ln_plot *p)
{
    cairo_t *cr = c->cr;
    cairo_set_line_width(cr, 1.0);
    const plot_ticks *sets[2] = {&p->y.minor, &p->y.major};
    for (int s = 0; s < 2; s++) { /* minor (log axis) lighter, under the major lines */
        double grey = s == 0 ? 0.95 : 0.88;
        cairo_set_source_rgb(cr, grey, grey, grey);
        for (int i = 0; i < sets[s]->n; i++) {
            double py = floor(axis_px(&p->y, sets[s]->v[i])) + 0.5;
            cairo_move_to(cr, p->ax, py);
            cairo_line_to(cr, p->ax + p->aw, py);
        }
        cairo_stroke(cr);
    }
    for (int i = 0; i < p->x.major.n; i++) {
        double px = floor(axis_px(&p->x, p->x.major.v[i])) + 0.5;
        cairo_move_to(cr, px, p->ay);
        cairo_line_to(cr, px, p->ay + p->ah);
    }
    cairo_stroke(cr);
}

static void set_line_style(cairo_t *cr, bool dashed)
{
    static const double dash[2] = {3.7 * LN_LINE_W, 1.6 * LN_LINE_W}; /* matplotlib's '--' */
    cairo_set_line_width(cr, LN_LINE_W);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
    cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
}

static void draw_series(plot_canvas *c, const ln_plot *p, int k)
{
    cairo_t *cr = c->cr;
    const attn_series *s = &p->series[k];
    double rgb[3], px, py;
    series_rgb(p, k, rgb);
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    if (s->scatter) {
        for (int64_t i = 0; i < s->n; i++) {
            if (!pixel_point(p, s, i, &px, &py)) continue;
            cairo_new_sub_path(cr);
            cairo_arc(cr, px, py, LN_DOT_R, 0, 2 * M_PI);
        }
        cairo_fill(cr);
        return;
    }
    bool pen_down = false;
    for (int64_t i = 0; i < s->n; i++) {
        if (!pixel_point(p, s, i, &px, &py)) {
            pen_down = false;
            continue;
        }
        if (pen_down)
            cairo_line_to(cr, px, py);
        else
            cairo_move_to(cr, px, py);
        pen_down = true;
    }
    set_line_style(cr, s->dashed);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
}

static void draw_ticks(plot_canvas *c, const ln_plot *p)
{
    cairo_t *cr = c->cr;
    char label[64];
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1.0);
    double below = p->ay + p->ah + 1.0;
    for (int i = 0; i < p->x.major.n; i++) {
        double px = axis_px(&p->x, p->x.major.v[i]);
        cairo_move_to(cr, floor(px) + 0.5, below);
        cairo_line_to(cr, floor(px) + 0.5, below + PLOT_TICK_LEN);
        cairo_stroke(cr);
        attn__plot_tick_label(label, sizeof label, &p->x.major, p->x.major.v[i]);
        attn__plot_text(c, label, PLOT_FONT_TICK, px, below + PLOT_TICK_LEN + PLOT_PAD, 0, 0.5, 0);
    }
    for (int i = 0; i < p->y.minor.n; i++) { /* short, unlabelled */
        double py = floor(axis_px(&p->y, p->y.minor.v[i])) + 0.5;
        cairo_move_to(cr, p->ax - 1.0, py);
        cairo_line_to(cr, p->ax - 1.0 - 0.5 * PLOT_TICK_LEN, py);
    }
    cairo_stroke(cr);
    for (int i = 0; i < p->y.major.n; i++) {
        double py = axis_px(&p->y, p->y.major.v[i]);
        cairo_move_to(cr, p->ax - 1.0, floor(py) + 0.5);
        cairo_line_to(cr, p->ax - 1.0 - PLOT_TICK_LEN, floor(py) + 0.5);
        cairo_stroke(cr);
        attn__plot_tick_label(label, sizeof label, &p->y.major, p->y.major.v[i]);
        attn__plot_text(c, label, PLOT_FONT_TICK, p->ax - 1.0 - PLOT_TICK_LEN - PLOT_PAD, py, 0, 1.0, 0.5);
    }
}

static void draw_titles(plot_canvas *c, const ln_plot *p)
{
    cairo_set_source_rgb(c->cr, 0, 0, 0);
    double cx = p->ax + 0.5 * p->aw;
    if (p->title && *p->title) attn__plot_text(c, p->title, PLOT_FONT_TITLE, cx, PLOT_MARGIN, 0, 0.5, 0);
    if (p->xlabel && *p->xlabel)
        attn__plot_text(c, p->xlabel, PLOT_FONT_LABEL, cx, p->height - PLOT_MARGIN, 0, 0.5, 1.0);
    if (p->ylabel && *p->ylabel)
        attn__plot_text(c, p->ylabel, PLOT_FONT_LABEL, PLOT_MARGIN, p->ay + 0.5 * p->ah, 90, 0.5, 0);
}

/* ---- legend ---- */

static bool has_label(const attn_series *s)
{
    return s->label && *s->label;
}

static void legend_size(plot_canvas *c, const ln_plot *p, ln_legend *lg)
{
    double text_w = 0, w, h;
    memset(lg, 0, sizeof *lg);
    for (int k = 0; k < p->n_series; k++) {
        if (!has_label(&p->series[k])) continue;
        attn__plot_text_measure(c, p->series[k].label, PLOT_FONT_TICK, 0, &w, &h);
        text_w = fmax(text_w, w);
        lg->row_h = fmax(lg->row_h, h + 4.0);
        lg->n++;
    }
    lg->w = 2 * LN_LEGEND_PAD + LN_LEGEND_HANDLE + 8.0 + text_w;
    lg->h = 2 * LN_LEGEND_PAD + lg->n * lg->row_h;
}

static bool inside(const ln_legend *lg, double x, double y)
{
    return x >= lg->x && x <= lg->x + lg->w && y >= lg->y && y <= lg->y + lg->h;
}

/* Points of the data (and along line segments, every 4 px) that the legend would cover. */
static int64_t covered(const ln_plot *p, const ln_legend *lg)
{
    int64_t count = 0;
    for (int k = 0; k < p->n_series; k++) {
        const attn_series *s = &p->series[k];
        bool have_prev = false;
        double qx = 0, qy = 0, px, py;
        for (int64_t i = 0; i < s->n; i++) {
            if (!pixel_point(p, s, i, &px, &py)) {
                have_prev = false;
                continue;
            }
            int steps = 1;
            if (have_prev && !s->scatter) steps = (int)fmin(256.0, fmax(1.0, hypot(px - qx, py - qy) / 4.0));
            for (int j = 1; j <= steps; j++) {
                double f = have_prev ? (double)j / steps : 1.0;
                count += inside(lg, qx + f * (px - qx), qy + f * (py - qy));
            }
            qx = px;
            qy = py;
            have_prev = true;
        }
    }
    return count;
}

/* matplotlib's 'best' among the four corners: upper right, upper left, lower left, lower
 * right, the first of the least covered. */
static void legend_place(const ln_plot *p, ln_legend *lg)
{
    double left = p->ax + LN_LEGEND_INSET, right = p->ax + p->aw - LN_LEGEND_INSET - lg->w;
    double top = p->ay + LN_LEGEND_INSET, bottom = p->ay + p->ah - LN_LEGEND_INSET - lg->h;
    const double corners[4][2] = {{right, top}, {left, top}, {left, bottom}, {right, bottom}};
    int64_t best = -1;
    double bx = right, by = top;
    for (int i = 0; i < 4; i++) {
        lg->x = corners[i][0];
        lg->y = corners[i][1];
        int64_t n = covered(p, lg);
        if (best < 0 || n < best) {
            best = n;
            bx = lg->x;
            by = lg->y;
        }
    }
    lg->x = floor(bx);
    lg->y = floor(by);
}

static void draw_legend_box(cairo_t *cr, const ln_legend *lg)
{
    double x = lg->x + 0.5, y = lg->y + 0.5, w = lg->w, h = lg->h, r = 3.0;
    cairo_new_sub_path(cr);
    cairo_arc(cr, x + w - r, y + r, r, -M_PI / 2, 0);
    cairo_arc(cr, x + w - r, y + h - r, r, 0, M_PI / 2);
    cairo_arc(cr, x + r, y + h - r, r, M_PI / 2, M_PI);
    cairo_arc(cr, x + r, y + r, r, M_PI, 1.5 * M_PI);
    cairo_close_path(cr);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.8);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
}

static void draw_legend(plot_canvas *c, const ln_plot *p)
{
    ln_legend lg;
    legend_size(c, p, &lg);
    if (lg.n == 0) return;
    legend_place(p, &lg);
    cairo_t *cr = c->cr;
    draw_legend_box(cr, &lg);
    double hx = lg.x + LN_LEGEND_PAD, row = 0;
    for (int k = 0; k < p->n_series; k++) {
        const attn_series *s = &p->series[k];
        if (!has_label(s)) continue;
        double cy = lg.y + LN_LEGEND_PAD + (row++ + 0.5) * lg.row_h, rgb[3];
        series_rgb(p, k, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        if (s->scatter) {
            cairo_arc(cr, hx + 0.5 * LN_LEGEND_HANDLE, cy, LN_DOT_R, 0, 2 * M_PI);
            cairo_fill(cr);
        } else {
            cairo_move_to(cr, hx, cy);
            cairo_line_to(cr, hx + LN_LEGEND_HANDLE, cy);
            set_line_style(cr, s->dashed);
            cairo_stroke(cr);
            cairo_set_dash(cr, NULL, 0, 0);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        attn__plot_text(c, s->label, PLOT_FONT_TICK, hx + LN_LEGEND_HANDLE + 8.0, cy, 0, 0, 0.5);
    }
}

/* ---- the figure ---- */

static void draw_plot(plot_canvas *c, const ln_plot *p)
{
    cairo_t *cr = c->cr;
    draw_grid(c, p);
    cairo_save(cr);
    cairo_rectangle(cr, p->ax, p->ay, p->aw, p->ah);
    cairo_clip(cr);
    for (int k = 0; k < p->n_series; k++) draw_series(c, p, k);
    cairo_restore(cr);
    attn__plot_frame(c, p->ax, p->ay, p->aw, p->ah);
    draw_ticks(c, p);
    draw_titles(c, p);
    draw_legend(c, p);
}

attn_status attn_plot_lines(const char *path, const attn_series *series, int n_series, const attn_lineplot_opts *opts)
{
    static const attn_lineplot_opts defaults = {0};
    const attn_lineplot_opts *o = opts ? opts : &defaults;
    ln_plot p = {.fn = "attn_plot_lines",
                 .series = series,
                 .n_series = n_series,
                 .title = o->title,
                 .xlabel = o->xlabel,
                 .ylabel = o->ylabel,
                 .width = o->width ? o->width : LN_WIDTH,
                 .height = o->height ? o->height : LN_HEIGHT};
    p.y.log = o->log_y;
    attn_status s = check_request(&p, o);
    if (s != ATTN_OK) return s;
    data_ranges(&p, o);
    plot_canvas c;
    s = attn__plot_canvas_open(&c, p.fn, path);
    if (s == ATTN_OK) s = layout(&c, &p);
    if (s == ATTN_OK) s = attn__plot_canvas_start(&c, p.width, p.height);
    if (s == ATTN_OK) draw_plot(&c, &p);
    return attn__plot_canvas_close(&c, s);
}
