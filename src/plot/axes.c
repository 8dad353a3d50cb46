/* What axes are made of: round-number ticks (linear, and decades on a log axis), their labels,
 * frames, and the vertical colour bar beside a heatmap. */
#include "plot_internal.h"

#include <math.h>
#include <string.h>

/* ---- ticks ---- */

/* Decimals that print every multiple of step exactly; -1 (%g) for very large or small ones. */
static int step_decimals(double step, double largest)
{
    if (largest >= 1e6 || step < 1e-5) return -1;
    for (int d = 0; d <= 6; d++) {
        double scaled = step * pow(10.0, d);
        if (fabs(scaled - round(scaled)) < 1e-6 * scaled) return d;
    }
    return -1;
}

void attn__plot_ticks_linear(plot_ticks *t, double lo, double hi, int max_ticks)
{
    static const double mults[] = {1.0, 2.0, 2.5, 5.0, 10.0};
    if (max_ticks < 2) max_ticks = 2;
    if (max_ticks > PLOT_MAX_TICKS) max_ticks = PLOT_MAX_TICKS;
    t->n = 0;
    t->decimals = -1;
    if (!(hi > lo) || !isfinite(hi - lo)) return;
    double mag = pow(10.0, floor(log10((hi - lo) / max_ticks)));
    double step = mag;
    for (size_t i = 0; i < sizeof mults / sizeof mults[0]; i++) {
        step = mults[i] * mag;
        double count = floor(hi / step + 1e-9) - ceil(lo / step - 1e-9) + 1;
        if (count <= max_ticks) break;
    }
    for (double k = ceil(lo / step - 1e-9); k <= floor(hi / step + 1e-9) && t->n < max_ticks; k++)
        t->v[t->n++] = k * step;
    t->decimals = step_decimals(step, fmax(fabs(lo), fabs(hi)));
}

void attn__plot_ticks_log(plot_ticks *major, plot_ticks *minor, double lo, double hi)
{
    int k0 = (int)ceil(log10(lo) - 1e-9), k1 = (int)floor(log10(hi) + 1e-9);
    minor->n = 0;
    minor->decimals = -1;
    if (k1 - k0 < 1) {
        attn__plot_ticks_linear(major, lo, hi, 6);
        return;
    }
    int every = (k1 - k0) / 8 + 1; /* at most about 9 labelled decades */
    major->n = 0;
    major->decimals = -1;
    for (int k = k0; k <= k1 && major->n < PLOT_MAX_TICKS; k += every) major->v[major->n++] = pow(10.0, k);
    if (every > 1) return;
    for (int k = k0 - 1; k <= k1; k++)
        for (int m = 2; m <= 9 && minor->n < PLOT_MAX_TICKS; m++) {
            double v = m * pow(10.0, k);
            if (v >= lo && v <= hi) minor->v[minor->n++] = v;
        }
}

void attn__plot_tick_label(char *buf, size_t len, const plot_ticks *t, double v)
{
    char num[64];
    if (t->decimals >= 0)
        snprintf(num, sizeof num, "%.*f", t->decimals, v);
    else
        snprintf(num, sizeof num, "%g", v);
    bool negative = num[0] == '-' && strspn(num + 1, "0.") != strlen(num + 1); /* not "-0.0" */
    const char *digits = num[0] == '-' ? num + 1 : num;
    snprintf(buf, len, "%s%s", negative ? "\xe2\x88\x92" : "", digits); /* U+2212 minus */
}

/* ---- frames and the colour bar ---- */

void attn__plot_frame(plot_canvas *c, double x, double y, double w, double h)
{
    cairo_t *cr = c->cr;
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, x - 0.5, y - 0.5, w + 1.0, h + 1.0);
    cairo_stroke(cr);
}

/* Ticks 40 pixels apart, 2 to 6 of them; a short bar whose nice step leaves one tick inside its
 * range (0.22 to 0.28 by 0.05) takes a finer step, so that every bar reads as a scale. */
static void colorbar_ticks(plot_ticks *t, double vmin, double vmax, double h)
{
    int max_ticks = (int)(h / 40.0);
    max_ticks = max_ticks < 2 ? 2 : max_ticks > 6 ? 6 : max_ticks;
    do attn__plot_ticks_linear(t, vmin, vmax, max_ticks++);
    while (t->n < 2 && max_ticks <= 6);
}

double attn__plot_colorbar_label_width(plot_canvas *c, double vmin, double vmax)
{
    plot_ticks t;
    colorbar_ticks(&t, vmin, vmax, 1e9);
    double widest = 0;
    for (int i = 0; i < t.n; i++) {
        char label[64];
        double w, h;
        attn__plot_tick_label(label, sizeof label, &t, t.v[i]);
        attn__plot_text_measure(c, label, PLOT_FONT_TICK, 0, &w, &h);
        widest = fmax(widest, w);
    }
    return PLOT_TICK_LEN + PLOT_PAD + widest;
}

/* The bar's colours, top (vmax) to bottom, as a 1 x 256 image. */
static cairo_surface_t *colorbar_image(attn_colormap cmap)
{
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 256);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) return img;
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < 256; r++) {
        double rgb[3];
        attn__plot_cmap_rgb(cmap, (255 - r + 0.5) / 256.0, rgb);
        *(uint32_t *)(data + (size_t)r * stride) = attn__plot_rgb_pixel(rgb);
    }
    cairo_surface_mark_dirty(img);
    return img;
}

void attn__plot_colorbar(plot_canvas *c, double x, double y, double w, double h, attn_colormap cmap, double vmin,
                         double vmax)
{
    cairo_t *cr = c->cr;
    cairo_surface_t *img = colorbar_image(cmap);
    cairo_save(cr);
    cairo_rectangle(cr, x, y, w, h);
    cairo_clip(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, w, h / 256.0);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    attn__plot_frame(c, x, y, w, h);

    plot_ticks t;
    colorbar_ticks(&t, vmin, vmax, h);
    for (int i = 0; i < t.n; i++) {
        double py = y + h - (t.v[i] - vmin) / (vmax - vmin) * h;
        char label[64];
        attn__plot_tick_label(label, sizeof label, &t, t.v[i]);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x + w + 0.5, floor(py) + 0.5);
        cairo_line_to(cr, x + w + 0.5 + PLOT_TICK_LEN, floor(py) + 0.5);
        cairo_stroke(cr);
        attn__plot_text(c, label, PLOT_FONT_TICK, x + w + PLOT_TICK_LEN + PLOT_PAD, py, 0, 0, 0.5);
    }
}
