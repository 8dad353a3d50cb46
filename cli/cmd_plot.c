/* attn plot heatmap: draws any saved matrix (e.g. the `weights` that attn op writes) as a
 * heatmap, or a grid of heatmaps for a stack of them (one panel per head). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void help(void)
{
    printf("usage: attn plot heatmap --in FILE.safetensors --tensor NAME --out FILE.png [options]\n\n"
           "Draws a (rows, cols) matrix from a safetensors file; a tensor with more dims is indexed\n"
           "with --index down to 2 dims, or, with --grid, its last 3 dims become one panel each.\n\n"
           "  --labels a,b,c      the same token labels on both axes\n"
           "  --xlabels a,b,c     key labels;  --ylabels a,b,c  query labels\n"
           "  --index i[,j]       leading indices (e.g. batch 0, head 2: --index 0,2)\n"
           "  --grid              one panel per matrix of the last 3 dims (e.g. heads)\n"
           "  --panel-titles a,b  titles of the --grid panels (default: head 1, head 2, ...)\n"
           "  --cmap viridis|reds colour map (default viridis)\n"
           "  --range auto|unit   colour scale from the data, or fixed [0, 1] (default auto)\n"
           "  --title TEXT --xlabel TEXT --ylabel TEXT\n"
           "  --values on|off     numbers in the cells (default: on up to 16 x 16)\n"
           "The format follows the extension of --out: .png, .svg or .pdf. Seed 002's picture:\n"
           "  --labels 词1,词2,词3,词4 --xlabel Key位置 --ylabel Query位置 --values on\n");
}

typedef struct plot_args {
    const char *in, *tensor, *out, *labels, *xlabels, *ylabels, *index, *title, *xlabel, *ylabel, *panel_titles;
    bool grid;
    attn_heatmap_opts opts;
} plot_args;

/* Splits a comma-separated list in place; returns the count (labels points into s). */
static int64_t split_list(char *s, const char ***labels)
{
    int64_t n = 1;
    for (char *p = s; *p; p++) n += *p == ',';
    *labels = malloc((size_t)n * sizeof **labels);
    if (!*labels) return -1;
    int64_t i = 0;
    for (char *tok = s, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        (*labels)[i++] = tok;
    }
    return n;
}

static int parse(int argc, char **argv, plot_args *a)
{
    memset(a, 0, sizeof *a);
    a->opts.auto_range = true; /* --range auto */
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) return help(), -1;
        if (!strcmp(o, "--grid")) {
            a->grid = true;
            continue;
        }
        const struct { const char *name; const char **dst; } strs[] = {
            {"--in", &a->in}, {"--tensor", &a->tensor}, {"--out", &a->out}, {"--labels", &a->labels},
            {"--xlabels", &a->xlabels}, {"--ylabels", &a->ylabels}, {"--index", &a->index},
            {"--title", &a->title}, {"--xlabel", &a->xlabel}, {"--ylabel", &a->ylabel},
            {"--panel-titles", &a->panel_titles},
        };
        const int n_strs = (int)(sizeof strs / sizeof strs[0]);
        int k = 0;
        while (k < n_strs && strcmp(o, strs[k].name)) k++;
        if (k == n_strs && strcmp(o, "--cmap") && strcmp(o, "--range") && strcmp(o, "--values"))
            return cli_fail(CLI_ERR_USAGE, "plot", "unknown option \"%s\" (see attn plot --help)", o);
        if (!(v = cli_value("plot", argc, argv, &i))) return CLI_ERR_USAGE;
        if (k < n_strs) *strs[k].dst = v;
        else if (!strcmp(o, "--cmap") && (!strcmp(v, "viridis") || !strcmp(v, "reds")))
            a->opts.cmap = !strcmp(v, "reds") ? ATTN_CMAP_REDS : ATTN_CMAP_VIRIDIS;
        else if (!strcmp(o, "--range") && (!strcmp(v, "auto") || !strcmp(v, "unit")))
            a->opts.auto_range = !strcmp(v, "auto");
        else if (!strcmp(o, "--values") && (!strcmp(v, "on") || !strcmp(v, "off")))
            a->opts.annotate = !strcmp(v, "on") ? 1 : -1;
        else
            return cli_fail(CLI_ERR_USAGE, "plot", "%s: unexpected value \"%s\" (see attn plot --help)", o, v);
    }
    if (!a->in || !a->tensor || !a->out)
        return cli_fail(CLI_ERR_USAGE, "plot", "--in, --tensor and --out are required (see attn plot --help)");
    const char *ext = strrchr(a->out, '.');
    if (!ext || (strcasecmp(ext, ".png") && strcasecmp(ext, ".svg") && strcasecmp(ext, ".pdf")))
        return cli_fail(CLI_ERR_USAGE, "plot", "--out %s: expected a .png, .svg or .pdf file name", a->out);
    return CLI_OK;
}

/* Offset of the matrix selected by --index in t (which keeps `keep` trailing dims). */
static int select_offset(const plot_args *a, const attn_tensor *t, int keep, int64_t *offset)
{
    int lead = t->ndim - keep;
    int64_t idx[ATTN_MAX_DIMS] = {0};
    int given = 0;
    if (a->index) {
        char *copy = strdup(a->index), *tok, *save = NULL;
        for (tok = strtok_r(copy, ",", &save); tok && given < ATTN_MAX_DIMS; tok = strtok_r(NULL, ",", &save)) {
            long v;
            if (!cli_parse_long("plot", "--index", tok, 0, 1L << 40, &v)) {
                free(copy);
                return CLI_ERR_USAGE;
            }
            idx[given++] = v;
        }
        free(copy);
    }
    if (given != lead) {
        char buf[64];
        return cli_fail(CLI_ERR_USAGE, "plot", "tensor \"%s\" has shape %s: give %d leading ind%s with --index%s",
                        a->tensor, attn_shape_str(t, buf, sizeof buf), lead, lead == 1 ? "ex" : "ices",
                        keep == 2 ? " (or --grid)" : "");
    }
    *offset = 0;
    for (int d = 0; d < lead; d++) {
        if (idx[d] >= t->shape[d])
            return cli_fail(CLI_ERR_USAGE, "plot", "--index: %lld is out of range for dim %d of size %lld",
                            (long long)idx[d], d, (long long)t->shape[d]);
        *offset = *offset * t->shape[d] + idx[d];
    }
    for (int d = lead; d < t->ndim; d++) *offset *= t->shape[d];
    return CLI_OK;
}

/* One panel per matrix of (panels, rows, cols), titled by --panel-titles or "head 1", "head 2",
 * ...; two rows of panels from 4 panels on. */
static int plot_grid(plot_args *a, const float *values, int64_t panels, int64_t rows, int64_t cols)
{
    enum { MAX_PANELS = 4096 }; /* the most attn_plot_heatmap_grid draws */
    if (panels < 1 || panels > MAX_PANELS)
        return cli_fail(CLI_ERR_DATA, "plot", "--grid: %lld panels; expected 1 to %d", (long long)panels, MAX_PANELS);
    char *store = NULL;
    const char **titles = NULL;
    int code = CLI_OK;
    if (a->panel_titles) {
        int64_t n = (store = strdup(a->panel_titles)) ? split_list(store, &titles) : -1;
        if (n != panels)
            code = cli_fail(CLI_ERR_USAGE, "plot", "%lld --panel-titles for %lld panels", (long long)n, (long long)panels);
    } else if ((store = malloc((size_t)panels * 16)) && (titles = malloc((size_t)panels * sizeof *titles))) {
        for (int64_t i = 0; i < panels; i++) {
            snprintf(store + i * 16, 16, "head %lld", (long long)i + 1);
            titles[i] = store + i * 16;
        }
    } else {
        code = cli_fail(CLI_ERR_DATA, "plot", "out of memory");
    }
    int gc = panels >= 4 ? (int)(panels + 1) / 2 : (int)panels, gr = panels % gc ? 1 : (int)panels / gc;
    if (panels % gc) gc = (int)panels;
    if (code == CLI_OK && attn_plot_heatmap_grid(a->out, values, gr, gc, rows, cols, titles, &a->opts) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "plot", "%s", attn_last_error());
    free(titles);
    free(store);
    return code;
}

int cmd_plot(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "heatmap")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return help(), CLI_OK;
        help();
        return CLI_ERR_USAGE;
    }
    plot_args a;
    int code = parse(argc, argv, &a);
    if (code != CLI_OK) return code < 0 ? CLI_OK : code;
    attn_st_file *f = attn_st_open(a.in);
    attn_tensor *t = f ? attn_st_load(f, a.tensor, NULL) : NULL;
    attn_st_close(f);
    if (!t) return cli_fail(CLI_ERR_DATA, "plot", "%s", attn_last_error());
    int keep = a.grid ? 3 : 2;
    int64_t offset = 0;
    char *label_copy[2] = {NULL, NULL};
    const char **labels[2] = {NULL, NULL};
    if (t->ndim < keep) {
        char buf[64];
        code = cli_fail(CLI_ERR_DATA, "plot", "tensor \"%s\" has shape %s; a heatmap needs at least %d dims",
                        a.tensor, attn_shape_str(t, buf, sizeof buf), keep);
    }
    if (code == CLI_OK) code = select_offset(&a, t, keep, &offset);
    const int64_t rows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 0, cols = t->ndim >= 1 ? t->shape[t->ndim - 1] : 0;
    const char *lists[2] = {a.xlabels ? a.xlabels : a.labels, a.ylabels ? a.ylabels : a.labels};
    int64_t want[2] = {cols, rows};
    for (int k = 0; code == CLI_OK && k < 2; k++) {
        if (!lists[k]) continue;
        label_copy[k] = strdup(lists[k]);
        int64_t n = label_copy[k] ? split_list(label_copy[k], &labels[k]) : -1;
        if (n != want[k])
            code = cli_fail(CLI_ERR_USAGE, "plot", "%d labels for the %s axis, which has %lld entries",
                            (int)n, k ? "query (rows)" : "key (columns)", (long long)want[k]);
    }
    if (code == CLI_OK) {
        a.opts.xticks = labels[0];
        a.opts.yticks = labels[1];
        a.opts.title = a.title;
        a.opts.xlabel = a.xlabel;
        a.opts.ylabel = a.ylabel;
        if (a.grid) {
            code = plot_grid(&a, t->data + offset, t->shape[t->ndim - 3], rows, cols);
        } else if (attn_plot_heatmap(a.out, t->data + offset, rows, cols, &a.opts) != ATTN_OK) {
            code = cli_fail(CLI_ERR_DATA, "plot", "%s", attn_last_error());
        }
        if (code == CLI_OK) printf("wrote %s\n", a.out);
    }
    for (int k = 0; k < 2; k++) {
        free(label_copy[k]);
        free(labels[k]);
    }
    attn_tensor_free(t);
    return code;
}
