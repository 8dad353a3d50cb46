/* Tests of the plot module: renders each kind of figure into a fresh temporary directory and
 * reads the pixels back. Cells of known value must have matplotlib's colour for that value
 * (viridis and Reds, checked against colours matplotlib gives), placed as the matrix says; a
 * grid shares one colour scale; line and scatter series sit where their data say, on linear
 * and log axes; pictures have the requested size; SVG files contain the label text; Chinese
 * labels are drawn with real glyphs (no missing-glyph boxes); bad paths give the right status
 * and a message naming the path; NaN never crashes. */
#include "testkit.h"

#include "plot/plot_internal.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *in_dir(const char *name)
{
    static char paths[4][256];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

/* ---- reading pictures back ---- */

typedef struct image {
    cairo_surface_t *s;
    int w, h, stride;
    const unsigned char *data;
} image;

static bool image_load(image *im, const char *path)
{
    im->s = cairo_image_surface_create_from_png(path);
    if (cairo_surface_status(im->s) != CAIRO_STATUS_SUCCESS) return false;
    im->w = cairo_image_surface_get_width(im->s);
    im->h = cairo_image_surface_get_height(im->s);
    im->stride = cairo_image_surface_get_stride(im->s);
    im->data = cairo_image_surface_get_data(im->s);
    return true;
}

static void image_free(image *im)
{
    cairo_surface_destroy(im->s);
}

static void pixel(const image *im, int x, int y, int rgb[3])
{
    uint32_t px = *(const uint32_t *)(im->data + (size_t)y * im->stride + 4 * (size_t)x);
    for (int c = 0; c < 3; c++) rgb[c] = (px >> (16 - 8 * c)) & 0xff;
}

static bool near(const image *im, int x, int y, const int rgb[3], int tol)
{
    if (x < 0 || y < 0 || x >= im->w || y >= im->h) return false;
    int p[3];
    pixel(im, x, y, p);
    for (int c = 0; c < 3; c++)
        if (abs(p[c] - rgb[c]) > tol) return false;
    return true;
}

/* How much of rgb, blended over white, pixel (x, y) holds (0..1), most over rows y-2..y+2:
 * an anti-aliased line of that colour passing there. A pixel that is not such a blend (the
 * channels disagree) counts 0. Every channel of rgb must be well below 255. */
static double line_coverage(const image *im, int x, int y, const int rgb[3])
{
    double best = 0;
    for (int yy = y - 2; yy <= y + 2; yy++) {
        if (yy < 0 || yy >= im->h) continue;
        int p[3];
        pixel(im, x, yy, p);
        double lo = 2, hi = -1;
        for (int c = 0; c < 3; c++) {
            double a = (255.0 - p[c]) / (255.0 - rgb[c]);
            lo = fmin(lo, a);
            hi = fmax(hi, a);
        }
        if (hi - lo <= 0.1) best = fmax(best, 0.5 * (lo + hi));
    }
    return best;
}

/* A 4-connected region of pixels within tol of a colour. */
typedef struct blob {
    int64_t n;
    double cx, cy;      /* centroid */
    int x0, y0, x1, y1; /* bounding box, inclusive */
} blob;

static blob flood(const image *im, const int rgb[3], int tol, unsigned char *seen, int *queue, int start)
{
    blob b = {0, 0, 0, im->w, im->h, -1, -1};
    int head = 0, tail = 0;
    queue[tail++] = start;
    seen[start] = 1;
    while (head < tail) {
        int at = queue[head++], x = at % im->w, y = at / im->w;
        b.n++;
        b.cx += x;
        b.cy += y;
        b.x0 = x < b.x0 ? x : b.x0;
        b.y0 = y < b.y0 ? y : b.y0;
        b.x1 = x > b.x1 ? x : b.x1;
        b.y1 = y > b.y1 ? y : b.y1;
        const int nx[4] = {x - 1, x + 1, x, x}, ny[4] = {y, y, y - 1, y + 1};
        for (int k = 0; k < 4; k++) {
            int next = ny[k] * im->w + nx[k];
            if (near(im, nx[k], ny[k], rgb, tol) && !seen[next]) {
                seen[next] = 1;
                queue[tail++] = next;
            }
        }
    }
    b.cx /= b.n;
    b.cy /= b.n;
    return b;
}

/* The k largest regions of a colour, largest first; returns how many were found (<= k). */
static int blobs(const image *im, const int rgb[3], int tol, blob *out, int k)
{
    size_t n = (size_t)im->w * im->h;
    unsigned char *seen = calloc(n, 1);
    int *queue = malloc(n * sizeof *queue), found = 0;
    for (int at = 0; seen && queue && at < (int)n; at++) {
        if (seen[at] || !near(im, at % im->w, at / im->w, rgb, tol)) continue;
        blob b = flood(im, rgb, tol, seen, queue, at);
        int i = found < k ? found++ : k;
        while (i > 0 && out[i - 1].n < b.n) {
            if (i < k) out[i] = out[i - 1];
            i--;
        }
        if (i < k) out[i] = b;
    }
    free(seen);
    free(queue);
    return found;
}

static blob largest(const image *im, const int rgb[3], int tol)
{
    blob b = {0};
    blobs(im, rgb, tol, &b, 1);
    return b;
}

static void cmap_rgb255(attn_colormap cmap, double t, int rgb[3])
{
    double f[3];
    attn__plot_cmap_rgb(cmap, t, f);
    for (int c = 0; c < 3; c++) rgb[c] = (int)lround(f[c] * 255.0);
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static bool file_starts_with(const char *path, const char *prefix)
{
    char buf[16] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    return n >= strlen(prefix) && memcmp(buf, prefix, strlen(prefix)) == 0;
}

/* ---- heatmaps ---- */

/* Cells of known value have the colour matplotlib gives that value, in matrix order. */
static void test_heatmap_colours(attn_colormap cmap, const int expected[5][3], const char *name)
{
    const float m[6] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, NAN}; /* (2, 3) */
    attn_heatmap_opts o = {.title = "known cells", .cmap = cmap, .annotate = -1};
    const char *path = in_dir(name);
    TK_OK(attn_plot_heatmap(path, m, 2, 3, &o));
    image im;
    TK_CHECK(image_load(&im, path), "%s: cannot read back", path);
    blob b[6];
    const int grey[3] = {153, 153, 153};
    for (int i = 0; i < 6; i++) {
        b[i] = largest(&im, i < 5 ? expected[i] : grey, 2);
        TK_CHECK(b[i].n >= 400, "%s: cell %d (value %g): only %lld pixels of its colour", name, i, m[i],
                 (long long)b[i].n);
        int bw = b[i].x1 - b[i].x0 + 1, bh = b[i].y1 - b[i].y0 + 1;
        TK_CHECK(abs(bw - bh) <= 1 && b[i].n == (int64_t)bw * bh,
                 "%s: cell %d is not a solid square: %d x %d box, %lld pixels", name, i, bw, bh, (long long)b[i].n);
    }
    for (int i = 0; i < 6; i++) { /* row-major placement */
        int r = i / 3, c = i % 3;
        TK_CHECK(fabs(b[i].cy - b[r * 3].cy) < 1 && fabs(b[i].cx - b[c].cx) < 1, "%s: cell %d off its row or column",
                 name, i);
        if (c > 0) TK_CHECK(b[i].cx > b[i - 1].cx, "%s: cell %d not right of %d", name, i, i - 1);
        if (r > 0) TK_CHECK(b[i].cy > b[i - 3].cy, "%s: cell %d not below %d", name, i, i - 3);
    }
    image_free(&im);
}

static void test_heatmap_colours_both(void)
{
    /* matplotlib's viridis(0, .25, .5, .75, 1) and Reds(...), in 8 bits */
    const int viridis[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    const int reds[5][3] = {{255, 245, 240}, {252, 187, 161}, {251, 105, 74}, {203, 24, 29}, {103, 0, 13}};
    test_heatmap_colours(ATTN_CMAP_VIRIDIS, viridis, "viridis.png");
    test_heatmap_colours(ATTN_CMAP_REDS, reds, "reds.png");
}

static void test_heatmap_size_and_labels(void)
{
    const char *tokens[5] = {"<bos>", "我", "喜欢", "machine", "<eos>"};
    float m[25];
    for (int i = 0; i < 25; i++) m[i] = (i % 6 == 0) ? 0.9f : 0.025f;
    attn_heatmap_opts o = {
        .title = "注意力 attention", .xticks = tokens, .yticks = tokens, .width = 420, .height = 360};
    const char *path = in_dir("sized.PNG"); /* the extension in any case */
    TK_OK(attn_plot_heatmap(path, m, 5, 5, &o));
    image im;
    if (image_load(&im, path)) {
        TK_CHECK(im.w == 420 && im.h == 360, "size %d x %d, asked for 420 x 360", im.w, im.h);
        image_free(&im);
    } else {
        TK_CHECK(false, "%s is not a PNG", path);
    }
    const char *svg = in_dir("labels.svg");
    TK_OK(attn_plot_heatmap(svg, m, 5, 5, &o));
    TK_CHECK(file_starts_with(svg, "<?xml"), "%s is not SVG", svg);
    const char *want[] = {"machine", "我", "喜欢", "&lt;bos&gt;", "注意力 attention", "query", "key", "0.90"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        TK_CHECK(file_contains(svg, want[i]), "%s lacks the text \"%s\"", svg, want[i]);
    const char *pdf = in_dir("labels.pdf");
    TK_OK(attn_plot_heatmap(pdf, m, 5, 5, &o));
    TK_CHECK(file_starts_with(pdf, "%PDF-"), "%s is not PDF", pdf);
}

/* A grid shares one colour scale (auto range over all panels), panels in row-major order. */
static void test_heatmap_grid(void)
{
    float m[16]; /* (2, 2, 2, 2): panel p, cell (r, c) holds (4p + 2r + c) / 15 */
    for (int i = 0; i < 16; i++) m[i] = i / 15.0f;
    const char *titles[4] = {"head 0", "head 1", "head 2", "head 3"};
    attn_heatmap_opts o = {.title = "all heads", .auto_range = true, .annotate = -1, .width = 600, .height = 500};
    const char *path = in_dir("grid.png");
    TK_OK(attn_plot_heatmap_grid(path, m, 2, 2, 2, 2, titles, &o));
    image im;
    if (!image_load(&im, path)) {
        TK_CHECK(false, "%s: cannot read back", path);
        return;
    }
    TK_CHECK(im.w == 600 && im.h == 500, "grid size %d x %d, asked for 600 x 500", im.w, im.h);
    blob b[16];
    for (int i = 0; i < 16; i++) {
        int rgb[3];
        cmap_rgb255(ATTN_CMAP_VIRIDIS, i / 15.0, rgb);
        b[i] = largest(&im, rgb, 2);
        TK_CHECK(b[i].n >= 400, "grid value %d/15: only %lld pixels of its colour", i, (long long)b[i].n);
    }
    for (int i = 0; i < 16; i++) { /* x grows with (panel column, cell column), y likewise */
        int p = i / 4, r = (i / 2) % 2, c = i % 2, gx = (p % 2) * 2 + c, gy = (p / 2) * 2 + r;
        for (int j = 0; j < 16; j++) {
            int q = j / 4, rj = (j / 2) % 2, cj = j % 2;
            int hx = (q % 2) * 2 + cj, hy = (q / 2) * 2 + rj;
            if (hx > gx) TK_CHECK(b[j].cx > b[i].cx + 10, "grid: cell %d not right of %d", j, i);
            if (hy > gy) TK_CHECK(b[j].cy > b[i].cy + 10, "grid: cell %d not below %d", j, i);
        }
    }
    image_free(&im);
}

/* attn_plot_heatmap_heads: every panel drawn, titled "head 1"...: the picture of the grid it
 * names (one row up to 3 and for odd counts, two rows of n/2 for even counts from 4), pixel for
 * pixel; with 5 heads, 5 panels of 5 colours (translate drew 4, untitled) */
static void test_heatmap_heads(void)
{
    for (int n = 1; n <= 8; n++) {
        float m[8 * 4]; /* (n, 2, 2): panel p holds p / 7 everywhere */
        for (int i = 0; i < n * 4; i++) m[i] = (float)(i / 4) / 7.0f;
        char names[8][16];
        const char *titles[8];
        for (int i = 0; i < n; i++) snprintf(names[i], sizeof names[i], "head %d", i + 1), titles[i] = names[i];
        const int cols = n >= 4 && n % 2 == 0 ? n / 2 : n, rows = n / cols;
        attn_heatmap_opts o = {.title = "per head", .vmin = 0, .vmax = 1, .annotate = -1, .width = 700, .height = 400};
        const char *heads = in_dir("heads.png"), *grid = in_dir("heads_grid.png");
        TK_OK(attn_plot_heatmap_heads(heads, m, n, 2, 2, NULL, &o));
        TK_OK(attn_plot_heatmap_grid(grid, m, rows, cols, 2, 2, titles, &o));
        image a, b;
        if (!image_load(&a, heads) || !image_load(&b, grid)) {
            TK_CHECK(false, "%d heads: cannot read the pictures back", n);
            continue;
        }
        TK_CHECK(a.w == b.w && a.h == b.h && a.stride == b.stride && !memcmp(a.data, b.data, (size_t)a.h * a.stride),
                 "%d heads: the picture of a %d x %d grid titled head 1..%d", n, rows, cols, n);
        for (int p = 0; n == 5 && p < n; p++) {
            int rgb[3];
            cmap_rgb255(ATTN_CMAP_VIRIDIS, p / 7.0, rgb);
            TK_CHECK(largest(&a, rgb, 2).n >= 400, "5 heads: panel %d drawn", p + 1);
        }
        image_free(&a), image_free(&b);
        remove(heads), remove(grid);
    }
    TK_CHECK(attn_plot_heatmap_heads(in_dir("none.png"), (float[]){0}, 0, 1, 1, NULL, NULL) == ATTN_ERR_ARG,
             "0 panels refused");
}

/* Pixels of colour rgb (within tol) with x in [x0, x1). */
static int64_t count_colour(const image *im, const int rgb[3], int tol, int x0, int x1)
{
    int64_t n = 0;
    for (int y = 0; y < im->h; y++)
        for (int x = x0; x < x1; x++) n += near(im, x, y, rgb, tol);
    return n;
}

/* panel_range: each panel's smallest value takes the colour map's first colour and its largest
 * the last, as the seed's subplots draw heads of 0.18-0.41 and 0.22-0.28; one shared scale
 * leaves the second panel without either end colour. */
static void test_heatmap_panel_range(void)
{
    const float m[8] = {0.18f, 0.41f, 0.30f, 0.25f, /* (1, 2, 2, 2) */
                        0.22f, 0.28f, 0.25f, 0.24f};
    const char *titles[2] = {"head 1", "head 2"};
    int lo[3], hi[3];
    cmap_rgb255(ATTN_CMAP_VIRIDIS, 0.0, lo);
    cmap_rgb255(ATTN_CMAP_VIRIDIS, 1.0, hi);
    for (int own = 0; own < 2; own++) {
        attn_heatmap_opts o = {.auto_range = true, .panel_range = own, .annotate = -1};
        const char *path = in_dir(own ? "panel_range.png" : "shared_range.png");
        TK_OK(attn_plot_heatmap_grid(path, m, 1, 2, 2, 2, titles, &o));
        image im;
        if (!image_load(&im, path)) {
            TK_CHECK(false, "%s: cannot read back", path);
            continue;
        }
        int64_t cell = 400; /* pixels that show a cell of that colour (a cell is 48 x 48 here) */
        int64_t left_lo = count_colour(&im, lo, 2, 0, im.w / 2), left_hi = count_colour(&im, hi, 2, 0, im.w / 2);
        int64_t right_lo = count_colour(&im, lo, 2, im.w / 2, im.w);
        int64_t right_hi = count_colour(&im, hi, 2, im.w / 2, im.w);
        TK_CHECK(left_lo >= cell && left_hi >= cell, "%s: the first panel's ends: %lld and %lld pixels", path,
                 (long long)left_lo, (long long)left_hi);
        if (own)
            TK_CHECK(right_lo >= cell && right_hi >= cell, "%s: the second panel's own ends: %lld and %lld pixels",
                     path, (long long)right_lo, (long long)right_hi);
        else
            TK_CHECK(right_lo < cell && right_hi < cell,
                     "%s: one shared scale, yet the second panel has an end colour: %lld and %lld pixels", path,
                     (long long)right_lo, (long long)right_hi);
        image_free(&im);
    }
}

static void test_heatmap_long_and_nan(void)
{
    enum {
        L = 512
    };
    float *m = malloc(sizeof(float) * L * L);
    if (!m) return;
    for (int i = 0; i < L * L; i++) m[i] = (float)((i * 7919) % 1000) / 1000.0f;
    m[5] = NAN;
    m[6] = INFINITY;
    m[7] = -INFINITY;
    const char *path = in_dir("long.png");
    TK_OK(attn_plot_heatmap(path, m, L, L, NULL));
    image im;
    if (image_load(&im, path)) {
        TK_CHECK(im.w > L && im.h > L, "512 x 512 drawn in %d x %d pixels", im.w, im.h);
        image_free(&im);
    } else {
        TK_CHECK(false, "%s: cannot read back", path);
    }
    for (int i = 0; i < 9; i++) m[i] = NAN;
    attn_heatmap_opts o = {.auto_range = true};
    TK_OK(attn_plot_heatmap(in_dir("all_nan.png"), m, 3, 3, &o));
    TK_OK(attn_plot_heatmap(in_dir("all_nan.svg"), m, 3, 3, &o));
    free(m);
}

/* ---- Chinese text ---- */

/* Every glyph of the text is found in a font (no hex box), one of them WenQuanYi. */
static void check_cjk_layout(plot_canvas *c, const char *text)
{
    attn__plot_text_set(c, text, PLOT_FONT_TICK, 0);
    TK_CHECK(pango_layout_get_unknown_glyphs_count(c->layout) == 0, "\"%s\": %d glyphs missing", text,
             pango_layout_get_unknown_glyphs_count(c->layout));
    bool wqy = false;
    PangoLayoutLine *line = pango_layout_get_line_readonly(c->layout, 0);
    for (GSList *run = line ? line->runs : NULL; run; run = run->next) {
        PangoGlyphItem *item = run->data;
        PangoFontDescription *d = pango_font_describe(item->item->analysis.font);
        wqy = wqy || strstr(pango_font_description_get_family(d), "WenQuanYi") != NULL;
        pango_font_description_free(d);
    }
    TK_CHECK(wqy, "\"%s\" is not drawn with WenQuanYi Zen Hei", text);
}

static void test_cjk_glyphs(void)
{
    plot_canvas c;
    if (attn__plot_canvas_open(&c, "test_plot", in_dir("text.png")) != ATTN_OK) {
        TK_CHECK(false, "canvas: %s", attn_last_error());
        return;
    }
    check_cjk_layout(&c, "我喜欢机器学习。");
    check_cjk_layout(&c, "<bos> 注意力 machine");
    /* the check can fail: an unassigned code point has no glyph anywhere */
    attn__plot_text_set(&c, "\xcd\xb8", PLOT_FONT_TICK, 0); /* U+0378 */
    TK_CHECK(pango_layout_get_unknown_glyphs_count(c.layout) == 1, "U+0378 should be a missing glyph");
    /* ink: a real 一 is one flat stroke; a missing-glyph box would be taller than wide */
    PangoRectangle ink;
    attn__plot_text_set(&c, "一", 40.0, 0);
    pango_layout_get_extents(c.layout, &ink, NULL);
    TK_CHECK(ink.height > 0 && ink.height < ink.width / 4, "一: ink %d x %d is not a stroke", ink.width / PANGO_SCALE,
             ink.height / PANGO_SCALE);
    TK_CHECK(attn__plot_canvas_close(&c, ATTN_ERR_STATE) == ATTN_ERR_STATE, "discarded canvas");
    TK_CHECK(access(in_dir("text.png"), F_OK) != 0, "a discarded canvas left a file");
}

/* ---- lines ---- */

/* Three corner dots (data (0,0), (1,0), (0,1)) give the axes' pixels, leaving the upper right
 * corner to the legend; the lines are checked at data points between them. On a log axis
 * (y from 1 to 100) the line at 10 must be halfway up. */
static void test_lines(bool log_y)
{
    const float cx[3] = {0, 1, 0}, lin_y[3] = {0, 0, 1}, log_yv[3] = {1, 1, 100};
    const float hx[5] = {0, 0.25f, 0.5f, 0.75f, 1};
    const float lin_h1[5] = {0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
    const float log_h1[5] = {10, 10, 10, 10, 10};
    const float lin_h2[5] = {0.6f, 0.6f, NAN, 0.6f, 0.6f};
    attn_series s[3] = {
        {.x = cx, .y = log_y ? log_yv : lin_y, .n = 3, .scatter = true, .color = ATTN_RGB(255, 0, 0)},
        {.label = "first line", .x = hx, .y = log_y ? log_h1 : lin_h1, .n = 5},
        {.label = "second, broken at NaN", .x = hx, .y = lin_h2, .n = log_y ? 0 : 5, .color = ATTN_RGB(0, 160, 0)},
    };
    attn_lineplot_opts o = {
        .title = "lines", .xlabel = "x", .ylabel = "y", .log_y = log_y, .width = 500, .height = 400};
    const char *path = in_dir(log_y ? "lines_log.png" : "lines.png");
    TK_OK(attn_plot_lines(path, s, 3, &o));
    image im;
    if (!image_load(&im, path)) {
        TK_CHECK(false, "%s: cannot read back", path);
        return;
    }
    TK_CHECK(im.w == 500 && im.h == 400, "lines size %d x %d, asked for 500 x 400", im.w, im.h);
    const int red[3] = {255, 0, 0}, blue[3] = {0x1f, 0x77, 0xb4}, green[3] = {0, 160, 0};
    blob dots[4];
    int n = blobs(&im, red, 8, dots, 4);
    TK_CHECK(n == 3 && dots[2].n >= 12, "%s: %d red dots, expected 3", path, n);
    if (n < 3) {
        image_free(&im);
        return;
    }
    double left = 1e9, right = -1e9, top = 1e9, bottom = -1e9;
    for (int i = 0; i < 3; i++) {
        left = fmin(left, dots[i].cx);
        right = fmax(right, dots[i].cx);
        top = fmin(top, dots[i].cy);
        bottom = fmax(bottom, dots[i].cy);
    }
    int mx = (int)lround(0.5 * (left + right));
    int y_blue = (int)lround(log_y ? 0.5 * (top + bottom) : bottom + 0.25 * (top - bottom));
    double cov = line_coverage(&im, mx, y_blue, blue);
    TK_CHECK(cov > 0.8,
             "%s: the line colour covers %.2f of the pixels at the data point "
             "(0.5, %s)",
             path, cov, log_y ? "10" : "0.25");
    if (!log_y) {
        int y_green = (int)lround(bottom + 0.6 * (top - bottom));
        int xq = (int)lround(left + 0.1 * (right - left));
        cov = line_coverage(&im, xq, y_green, green);
        TK_CHECK(cov > 0.8, "%s: the green line covers %.2f at (0.1, 0.6)", path, cov);
        cov = line_coverage(&im, mx, y_green, green);
        TK_CHECK(cov < 0.05, "%s: the green line is not broken at its NaN (%.2f)", path, cov);
    }
    image_free(&im);
}

static void test_lines_svg_and_defaults(void)
{
    float y[50];
    for (int i = 0; i < 50; i++) y[i] = expf(-i / 10.0f);
    attn_series s[2] = {{"train loss", NULL, y, 50, false, false, 0}, {"损失 (验证)", NULL, y, 50, true, false, 0}};
    const char *svg = in_dir("loss.svg");
    TK_OK(attn_plot_lines(svg, s, 2, NULL));
    TK_CHECK(file_contains(svg, "train loss") && file_contains(svg, "损失 (验证)"), "%s lacks the legend text", svg);
    const char *png = in_dir("loss.png");
    attn_lineplot_opts o = {.log_y = true, .ylim = {0.001f, 10.0f}};
    TK_OK(attn_plot_lines(png, s, 2, &o));
    image im;
    if (image_load(&im, png)) {
        TK_CHECK(im.w == 640 && im.h == 480, "default size %d x %d, not 640 x 480", im.w, im.h);
        image_free(&im);
    }
    attn_series empty = {.label = "nothing", .n = 0};
    TK_OK(attn_plot_lines(in_dir("empty.pdf"), &empty, 1, NULL));
}

/* ---- errors ---- */

static void expect_error(attn_status got, attn_status want, const char *needle, const char *what)
{
    TK_CHECK(got == want, "%s: status %s, expected %s", what, attn_status_name(got), attn_status_name(want));
    TK_CHECK(strstr(attn_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, attn_last_error(),
             needle);
}

static bool dir_has_leftovers(void)
{
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));) found = found || strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return found;
}

static void test_errors(void)
{
    const float m[4] = {0, 1, 1, 0};
    const char *jpg = in_dir("picture.jpg");
    expect_error(attn_plot_heatmap(jpg, m, 2, 2, NULL), ATTN_ERR_ARG, "picture.jpg", ".jpg");
    TK_CHECK(strstr(attn_last_error(), ".png") && strstr(attn_last_error(), ".svg"),
             "the message should say what is expected: %s", attn_last_error());
    expect_error(attn_plot_heatmap(in_dir("noext"), m, 2, 2, NULL), ATTN_ERR_ARG, "noext", "no extension");
    const char *nodir = "/nonexistent-attn-dir/sub/plot.png";
    expect_error(attn_plot_heatmap(nodir, m, 2, 2, NULL), ATTN_ERR_IO, nodir, "missing directory");
    const char *isdir = in_dir("folder.png");
    TK_CHECK(mkdir(isdir, 0700) == 0, "mkdir %s", isdir);
    expect_error(attn_plot_heatmap(isdir, m, 2, 2, NULL), ATTN_ERR_IO, isdir, "onto a directory");
    rmdir(isdir);
    attn_series s = {.y = m, .n = 4};
    expect_error(attn_plot_lines(nodir, &s, 1, NULL), ATTN_ERR_IO, nodir, "lines, missing dir");
    expect_error(attn_plot_lines(in_dir("x.gif"), &s, 1, NULL), ATTN_ERR_ARG, "x.gif", "gif");

    expect_error(attn_plot_heatmap(in_dir("a.png"), NULL, 2, 2, NULL), ATTN_ERR_ARG, "values", "no values");
    expect_error(attn_plot_heatmap(in_dir("a.png"), m, 0, 2, NULL), ATTN_ERR_ARG, "0 x 2", "no rows");
    attn_heatmap_opts bad_range = {.vmin = 1, .vmax = 0};
    expect_error(attn_plot_heatmap(in_dir("a.png"), m, 2, 2, &bad_range), ATTN_ERR_ARG, "vmin", "vmin > vmax");
    attn_heatmap_opts tiny = {.width = 40, .height = 30};
    expect_error(attn_plot_heatmap(in_dir("a.png"), m, 2, 2, &tiny), ATTN_ERR_ARG, "40 x 30", "too small");
    expect_error(attn_plot_lines(in_dir("a.png"), &s, 0, NULL), ATTN_ERR_ARG, "series", "no series");
    attn_series no_y = {.n = 3};
    expect_error(attn_plot_lines(in_dir("a.png"), &no_y, 1, NULL), ATTN_ERR_ARG, "y missing", "series without y");
    attn_lineplot_opts bad_lim = {.log_y = true, .ylim = {-1, 1}};
    expect_error(attn_plot_lines(in_dir("a.png"), &s, 1, &bad_lim), ATTN_ERR_ARG, "ylim", "log axis from -1");
    TK_CHECK(access(in_dir("a.png"), F_OK) != 0, "a failed plot left a.png behind");
    TK_CHECK(!dir_has_leftovers(), "a failed plot left a temporary file in %s", dir);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) remove(in_dir(e->d_name));
    if (d) closedir(d);
    rmdir(dir);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/attn_test_plot_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_heatmap_colours_both();
    test_heatmap_size_and_labels();
    test_heatmap_grid();
    test_heatmap_heads();
    test_heatmap_panel_range();
    test_heatmap_long_and_nan();
    test_cjk_glyphs();
    test_lines(false);
    test_lines(true);
    test_lines_svg_and_defaults();
    test_errors();
    TK_CHECK(!dir_has_leftovers(), "temporary files left in %s", dir);
    if (!getenv("ATTN_TEST_KEEP")) remove_dir();
    return tk_finish("test_plot");
}
