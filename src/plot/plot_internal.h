/* Private to src/plot: the canvas (a file of one format, a cairo surface, Pango text), tick
 * choice and axis decorations, colour maps. The figures (heatmap.c, lines.c) are built from
 * these. Coordinates are pixels of the picture (points in SVG and PDF), y downwards. */
#ifndef ATTN_PLOT_INTERNAL_H
#define ATTN_PLOT_INTERNAL_H

#include "../core/core_internal.h"
#include "attn_plot.h"

#include <cairo.h>
#include <pango/pangocairo.h>
#include <stdio.h>

/* Fonts: Latin from DejaVu Sans, CJK from WenQuanYi Zen Hei (fontconfig falls back further
 * for anything neither covers). Sizes in pixels. */
#define PLOT_FONT_FAMILY "DejaVu Sans,WenQuanYi Zen Hei"
#define PLOT_FONT_TICK 12.0
#define PLOT_FONT_LABEL 13.0
#define PLOT_FONT_TITLE 15.0
#define PLOT_TICK_LEN 4.0   /* tick marks, outside the frame as matplotlib draws them */
#define PLOT_PAD 5.0        /* between a tick and its label, a label and the axis title */
#define PLOT_MARGIN 10.0    /* around the picture */
#define PLOT_MAX_SIDE 16384 /* the largest picture side we draw */
#define PLOT_NAN_GREY 0.6

/* ---- canvas ---- */

typedef enum plot_format {
    PLOT_PNG,
    PLOT_SVG,
    PLOT_PDF
} plot_format;

typedef struct plot_canvas {
    const char *fn; /* the public function, for messages */
    const char *path;
    plot_format format;
    attn__outfile out;  /* the picture's bytes go here */
    int write_errno;    /* the first failed write, 0 if none */
    attn__buf svg;      /* SVG bytes until the text layer is added */
    attn__buf svg_text; /* invisible <text> elements, one per drawn text */
    PangoContext *pango;
    PangoLayout *layout;
    PangoFontDescription *font;
    cairo_surface_t *surface;
    cairo_t *cr;
    double width, height;
} plot_canvas;

/* Checks path's extension and opens the output file; text can be measured from here on.
 * ATTN_ERR_ARG for an unknown extension, ATTN_ERR_IO when the file cannot be created. On
 * failure the canvas holds nothing (attn__plot_canvas_close is still allowed). */
attn_status attn__plot_canvas_open(plot_canvas *c, const char *fn, const char *path);
/* Creates the surface, width x height, white. */
attn_status attn__plot_canvas_start(plot_canvas *c, int width, int height);
/* With s == ATTN_OK: writes the picture and renames it onto path; otherwise removes the
 * temporary file. Frees everything either way and returns the final status. */
attn_status attn__plot_canvas_close(plot_canvas *c, attn_status s);

/* Text: set it (UTF-8, invalid bytes replaced) at a size, then measure or draw it. max_w > 0
 * ellipsizes longer text at the end. */
void attn__plot_text_set(plot_canvas *c, const char *text, double size, double max_w);
void attn__plot_text_extent(const plot_canvas *c, double *w, double *h);
/* Width and height of text, set and measured in one call. */
void attn__plot_text_measure(plot_canvas *c, const char *text, double size, double max_w, double *w, double *h);
/* Height of one line of text at size; 0 for NULL or "". */
double attn__plot_text_height(plot_canvas *c, const char *text, double size);
/* Draws the text set last, in the current source colour, rotated by angle degrees
 * (counter-clockwise) about (x, y); (ax, ay) is the point of its box placed at (x, y), as
 * fractions of its width and height (0, 0 = top left; 0.5, 0.5 = centre). */
void attn__plot_text_draw(plot_canvas *c, double x, double y, double angle, double ax, double ay);
/* Set + draw. */
void attn__plot_text(plot_canvas *c, const char *text, double size, double x, double y, double angle, double ax,
                     double ay);

/* ---- ticks and decorations (axes.c) ---- */

#define PLOT_MAX_TICKS 64

typedef struct plot_ticks {
    double v[PLOT_MAX_TICKS]; /* ascending */
    int n;
    int decimals; /* for the labels; -1: %g */
} plot_ticks;

/* Round-number ticks inside [lo, hi] (steps 1, 2, 2.5, 5 x 10^k), at most max_ticks. */
void attn__plot_ticks_linear(plot_ticks *t, double lo, double hi, int max_ticks);
/* Decades inside [lo, hi] (lo > 0) as major ticks, 2..9 x 10^k as minor ones (none when the
 * range is wide); falls back to linear ticks when fewer than two decades are inside. */
void attn__plot_ticks_log(plot_ticks *major, plot_ticks *minor, double lo, double hi);
/* A tick's label with the ticks' decimals, a real minus sign for negatives. */
void attn__plot_tick_label(char *buf, size_t len, const plot_ticks *t, double v);

/* Width of the labels right of a vertical colour bar for [vmin, vmax], ticks included. */
double attn__plot_colorbar_label_width(plot_canvas *c, double vmin, double vmax);
/* A vertical colour bar in the box, its ticks and labels to the right. */
void attn__plot_colorbar(plot_canvas *c, double x, double y, double w, double h, attn_colormap cmap, double vmin,
                         double vmax);
/* A 1-pixel frame around the box, on pixel centres. */
void attn__plot_frame(plot_canvas *c, double x, double y, double w, double h);

/* ---- colour maps (colormap.c) ---- */

/* t in [0, 1] (clamped) to rgb in [0, 1]; NaN to grey. */
void attn__plot_cmap_rgb(attn_colormap cmap, double t, double rgb[3]);
/* rgb in [0, 1] to an opaque CAIRO_FORMAT_ARGB32 pixel. */
uint32_t attn__plot_rgb_pixel(const double rgb[3]);
/* Whether white text reads better than black on this colour. */
bool attn__plot_rgb_is_dark(const double rgb[3]);

#endif
