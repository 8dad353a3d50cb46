/* The canvas every figure draws on: picks PNG, SVG or PDF from the file name, writes through
 * the library's output file (a temporary file renamed onto path when the picture is complete,
 * or a device written in place: src/core/outfile.c), and draws text with
 * Pango (per-glyph font fallback, so Chinese labels get WenQuanYi Zen Hei). cairo draws SVG
 * text as glyph outlines, so the SVG also gets every text as an invisible <text> element laid
 * over the glyphs: the file can be searched and its text selected. */
#include "plot_internal.h"

#include "../core/core_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>

/* ---- the SVG text (attn__buf: a failure sticks in failed, read when the file is written) ---- */

static void buf_printf(attn__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(attn__buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->failed = true;
        return;
    }
    attn__buf_append(b, tmp, (size_t)n);
}

/* text as XML character data: markup characters escaped, control characters as spaces. */
static void buf_append_xml(attn__buf *b, const char *text)
{
    for (const char *p = text; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '&')
            attn__buf_append(b, "&amp;", 5);
        else if (ch == '<')
            attn__buf_append(b, "&lt;", 4);
        else if (ch == '>')
            attn__buf_append(b, "&gt;", 4);
        else if (ch == '"')
            attn__buf_append(b, "&quot;", 6);
        else if (ch < 0x20 || ch == 0x7f)
            attn__buf_append(b, " ", 1);
        else
            attn__buf_append(b, p, 1);
    }
}

/* ---- opening: format and temporary file ---- */

static bool format_from_path(const char *path, plot_format *format)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (!dot) return false;
    static const struct {
        const char *ext;
        plot_format format;
    } known[] = {{".png", PLOT_PNG}, {".svg", PLOT_SVG}, {".pdf", PLOT_PDF}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcasecmp(dot, known[i].ext) == 0) {
            *format = known[i].format;
            return true;
        }
    }
    return false;
}

/* The Pango context: our font, unhinted metrics (so measured sizes hold on every surface). */
static attn_status open_text(plot_canvas *c)
{
    c->pango = pango_font_map_create_context(pango_cairo_font_map_get_default());
    c->font = pango_font_description_from_string(PLOT_FONT_FAMILY);
    if (!c->pango || !c->font) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", c->fn);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    pango_cairo_context_set_font_options(c->pango, fo);
    cairo_font_options_destroy(fo);
    pango_context_set_round_glyph_positions(c->pango, FALSE);
    c->layout = pango_layout_new(c->pango);
    if (!c->layout) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", c->fn);
    pango_layout_set_single_paragraph_mode(c->layout, TRUE);
    return ATTN_OK;
}

attn_status attn_plot_path_check(const char *path)
{
    plot_format format;
    if (!path || !*path) return attn__fail(ATTN_ERR_ARG, "picture path is empty");
    if (!format_from_path(path, &format))
        return attn__fail(ATTN_ERR_ARG,
                          "%s: unknown picture format; expected a name ending in .png, "
                          ".svg or .pdf",
                          path);
    return attn_output_check(path);
}

attn_status attn__plot_canvas_open(plot_canvas *c, const char *fn, const char *path)
{
    memset(c, 0, sizeof *c);
    c->fn = fn;
    c->path = path;
    if (attn_plot_path_check(path) != ATTN_OK) return attn_last_status();
    format_from_path(path, &c->format);
    if (attn__outfile_open(&c->out, path) != ATTN_OK) return attn_last_status();
    return open_text(c);
}

/* ---- the surface ---- */

static cairo_status_t write_to_file(void *closure, const unsigned char *data, unsigned int len)
{
    plot_canvas *c = closure;
    if (c->write_errno) return CAIRO_STATUS_WRITE_ERROR;
    if (len == 0) return CAIRO_STATUS_SUCCESS;
    errno = 0;
    if (fwrite(data, 1, len, c->out.fp) != len) {
        c->write_errno = errno ? errno : EIO;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    return CAIRO_STATUS_SUCCESS;
}

static cairo_status_t write_to_svg_buf(void *closure, const unsigned char *data, unsigned int len)
{
    plot_canvas *c = closure;
    attn__buf_append(&c->svg, (const char *)data, len);
    return c->svg.failed ? CAIRO_STATUS_NO_MEMORY : CAIRO_STATUS_SUCCESS;
}

attn_status attn__plot_canvas_start(plot_canvas *c, int width, int height)
{
    if (width < 1 || height < 1 || width > PLOT_MAX_SIDE || height > PLOT_MAX_SIDE)
        return attn__fail(ATTN_ERR_ARG, "%s: '%s': picture size %d x %d is outside 1..%d", c->fn, c->path, width,
                          height, PLOT_MAX_SIDE);
    c->width = width;
    c->height = height;
    if (c->format == PLOT_PNG)
        c->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
    else if (c->format == PLOT_SVG)
        c->surface = cairo_svg_surface_create_for_stream(write_to_svg_buf, c, width, height);
    else
        c->surface = cairo_pdf_surface_create_for_stream(write_to_file, c, width, height);
    c->cr = cairo_create(c->surface);
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS)
        return attn__fail(ATTN_ERR_NOMEM, "%s: '%s': cannot make a %d x %d picture: %s", c->fn, c->path, width, height,
                          cairo_status_to_string(cairo_status(c->cr)));
    cairo_set_source_rgb(c->cr, 1, 1, 1);
    cairo_paint(c->cr);
    return ATTN_OK;
}

/* ---- closing ---- */

/* Where the SVG's closing tag starts (its end if there is none). */
static size_t svg_close_tag(const attn__buf *b)
{
    static const char tag[] = "</svg>";
    size_t n = sizeof tag - 1;
    for (size_t i = b->len; i >= n; i--)
        if (memcmp(b->data + i - n, tag, n) == 0) return i - n;
    return b->len;
}

/* The SVG with the text layer inserted before its closing tag. */
static void write_svg(plot_canvas *c)
{
    static const char open_g[] = "<g fill-opacity=\"0\" font-family=\"DejaVu Sans, WenQuanYi Zen Hei, sans-serif\">\n";
    static const char close_g[] = "</g>\n";
    size_t head = svg_close_tag(&c->svg);
    write_to_file(c, (const unsigned char *)c->svg.data, (unsigned)head);
    write_to_file(c, (const unsigned char *)open_g, sizeof open_g - 1);
    write_to_file(c, (const unsigned char *)c->svg_text.data, (unsigned)c->svg_text.len);
    write_to_file(c, (const unsigned char *)close_g, sizeof close_g - 1);
    write_to_file(c, (const unsigned char *)c->svg.data + head, (unsigned)(c->svg.len - head));
}

/* Renders the picture into the temporary file. */
static attn_status finish(plot_canvas *c)
{
    cairo_status_t st = cairo_status(c->cr);
    if (st == CAIRO_STATUS_SUCCESS) {
        if (c->format == PLOT_PNG) {
            cairo_surface_flush(c->surface);
            st = cairo_surface_write_to_png_stream(c->surface, write_to_file, c);
        } else {
            cairo_surface_finish(c->surface);
            st = cairo_surface_status(c->surface);
        }
    }
    if (st == CAIRO_STATUS_SUCCESS && c->format == PLOT_SVG) {
        if (c->svg.failed || c->svg_text.failed)
            st = CAIRO_STATUS_NO_MEMORY;
        else
            write_svg(c);
    }
    if (c->write_errno) return attn__outfile_write_error(&c->out, c->write_errno);
    if (st != CAIRO_STATUS_SUCCESS)
        return attn__fail(st == CAIRO_STATUS_NO_MEMORY ? ATTN_ERR_NOMEM : ATTN_ERR_IO, "%s: '%s': drawing failed: %s",
                          c->fn, c->path, cairo_status_to_string(st));
    return ATTN_OK;
}

attn_status attn__plot_canvas_close(plot_canvas *c, attn_status s)
{
    if (s == ATTN_OK) s = c->cr ? finish(c) : attn__fail(ATTN_ERR_STATE, "%s: nothing drawn", c->fn);
    if (c->cr) cairo_destroy(c->cr);
    if (c->surface) cairo_surface_destroy(c->surface);
    if (c->layout) g_object_unref(c->layout);
    if (c->pango) g_object_unref(c->pango);
    if (c->font) pango_font_description_free(c->font);
    attn__buf_free(&c->svg);
    attn__buf_free(&c->svg_text);
    s = attn__outfile_close(&c->out, s);
    memset(c, 0, sizeof *c);
    return s;
}

/* ---- text ---- */

void attn__plot_text_set(plot_canvas *c, const char *text, double size, double max_w)
{
    const char *s = text ? text : "";
    char *valid = g_utf8_validate(s, -1, NULL) ? NULL : g_utf8_make_valid(s, -1);
    pango_font_description_set_absolute_size(c->font, size * PANGO_SCALE);
    pango_layout_set_font_description(c->layout, c->font);
    pango_layout_set_width(c->layout, max_w > 0 ? (int)(max_w * PANGO_SCALE) : -1);
    pango_layout_set_ellipsize(c->layout, max_w > 0 ? PANGO_ELLIPSIZE_END : PANGO_ELLIPSIZE_NONE);
    pango_layout_set_text(c->layout, valid ? valid : s, -1);
    g_free(valid);
}

void attn__plot_text_extent(const plot_canvas *c, double *w, double *h)
{
    PangoRectangle logical;
    pango_layout_get_extents(c->layout, NULL, &logical);
    *w = (double)logical.width / PANGO_SCALE;
    *h = (double)logical.height / PANGO_SCALE;
}

void attn__plot_text_measure(plot_canvas *c, const char *text, double size, double max_w, double *w, double *h)
{
    attn__plot_text_set(c, text, size, max_w);
    attn__plot_text_extent(c, w, h);
}

double attn__plot_text_height(plot_canvas *c, const char *text, double size)
{
    if (!text || !*text) return 0;
    double w, h;
    attn__plot_text_measure(c, text, size, 0, &w, &h);
    return h;
}

/* The invisible twin of the text just drawn; the current matrix holds its rotation. */
static void record_svg_text(plot_canvas *c, double left, double top, double w)
{
    cairo_matrix_t m;
    cairo_get_matrix(c->cr, &m);
    double baseline = (double)pango_layout_get_baseline(c->layout) / PANGO_SCALE;
    double size = (double)pango_font_description_get_size(c->font) / PANGO_SCALE;
    buf_printf(&c->svg_text,
               "<text transform=\"matrix(%.4f %.4f %.4f %.4f %.2f %.2f)\" x=\"%.2f\" y=\"%.2f\" "
               "font-size=\"%.1f\" textLength=\"%.2f\" lengthAdjust=\"spacingAndGlyphs\">",
               m.xx, m.yx, m.xy, m.yy, m.x0, m.y0, left, top + baseline, size, w);
    buf_append_xml(&c->svg_text, pango_layout_get_text(c->layout));
    attn__buf_append(&c->svg_text, "</text>\n", 8);
}

void attn__plot_text_draw(plot_canvas *c, double x, double y, double angle, double ax, double ay)
{
    double w, h;
    attn__plot_text_extent(c, &w, &h);
    cairo_save(c->cr);
    cairo_translate(c->cr, x, y);
    cairo_rotate(c->cr, -angle * M_PI / 180.0);
    cairo_move_to(c->cr, -ax * w, -ay * h);
    pango_cairo_update_layout(c->cr, c->layout);
    pango_cairo_show_layout(c->cr, c->layout);
    if (c->format == PLOT_SVG && w > 0) record_svg_text(c, -ax * w, -ay * h, w);
    cairo_restore(c->cr);
}

void attn__plot_text(plot_canvas *c, const char *text, double size, double x, double y, double angle, double ax,
                     double ay)
{
    attn__plot_text_set(c, text, size, 0);
    attn__plot_text_draw(c, x, y, angle, ax, ay);
}
