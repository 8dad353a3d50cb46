/* attn plot heatmap: draws any saved matrix (e.g. the `weights` that attn op writes) as a
 * heatmap, or a grid of heatmaps for a stack of them (one panel per head). */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct plot_args {
    const char *in, *tensor, *out, *labels, *xlabels, *ylabels, *index, *title, *xlabel, *ylabel, *panel_titles;
    bool grid;
    int cmap, range, values; /* indexes into the choices below */
    attn_heatmap_opts opts;
} plot_args;

static const char *const cmap_names[] = {"viridis", "reds", NULL}; /* attn_colormap order */
static const char *const range_names[] = {"auto", "unit", "panel", NULL};
static const char *const values_names[] = {"auto", "on", "off", NULL};

#define O(kind, field) CLI_OPT_AT(plot_args, kind, field)
static const cli_option options[] = {
    {"--in", "FILE", O(CLI_IN_FILE, in), 0, 0, NULL, NULL, "the safetensors file (required)"},
    {"--tensor", "NAME", O(CLI_NAME, tensor), 0, 0, NULL, NULL, "the tensor to draw (required)"},
    {"--out", "FILE", O(CLI_PICTURE, out), 0, 0, NULL, NULL, "the picture: .png, .svg or .pdf (required)"},
    {"--labels", "a,b,c", O(CLI_NAME, labels), 0, 0, NULL, NULL, "the same token labels on both axes"},
    {"--xlabels", "a,b,c", O(CLI_NAME, xlabels), 0, 0, NULL, NULL, "key (column) labels"},
    {"--ylabels", "a,b,c", O(CLI_NAME, ylabels), 0, 0, NULL, NULL, "query (row) labels"},
    {"--index", "i[,j]", O(CLI_NAME, index), 0, 0, NULL, NULL, "leading indices (e.g. batch 0, head 2: --index 0,2)"},
    {"--grid", NULL, O(CLI_FLAG, grid), 0, 0, NULL, NULL, "one panel per matrix of the last 3 dims (e.g. heads)"},
    {"--panel-titles", "a,b", O(CLI_NAME, panel_titles), 0, 0, NULL, NULL,
     "titles of the --grid panels (default: head 1, head 2, ...)"},
    {"--cmap", NULL, O(CLI_CHOICE, cmap), 0, 0, cmap_names, "viridis", "colour map"},
    {"--range", NULL, O(CLI_CHOICE, range), 0, 0, range_names, "auto",
     "colour scale from the data, fixed [0, 1], or (--grid) each panel its own, with its own bar"},
    {"--title", "TEXT", O(CLI_TEXT, title), 0, 0, NULL, NULL, "above the picture"},
    {"--xlabel", "TEXT", O(CLI_TEXT, xlabel), 0, 0, NULL, NULL, "the column axis title (default key)"},
    {"--ylabel", "TEXT", O(CLI_TEXT, ylabel), 0, 0, NULL, NULL, "the row axis title (default query)"},
    {"--values", NULL, O(CLI_CHOICE, values), 0, 0, values_names, "auto", "numbers in the cells (auto: up to 16 x 16)"},
};
#undef O

const cli_spec plot_spec = {
    .cmd = "plot",
    .synopsis = "heatmap --in FILE.safetensors --tensor NAME --out FILE.png [options]",
    .about = "Draws a (rows, cols) matrix from a safetensors file (e.g. the weights attn op writes); a\n"
             "tensor with more dims is indexed with --index down to 2 dims, or, with --grid, its last 3\n"
             "dims become one panel each.",
    CLI_OPTIONS(options),
    .notes = "The format follows the extension of --out. Seed 002's picture:\n"
             "  --labels 词1,词2,词3,词4 --xlabel Key位置 --ylabel Query位置 --values on\n",
};

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
    int code = cli_parse(&plot_spec, a, argc, argv, 2, NULL, NULL);
    if (code != CLI_OK) return code;
    if (!a->in || !a->tensor || !a->out)
        return cli_fail(CLI_ERR_USAGE, "plot", "--in, --tensor and --out are required (see attn plot --help)");
    if (cli_check_paths(&plot_spec, a, NULL) != CLI_OK) return CLI_ERR_USAGE;
    if (a->panel_titles && !a->grid) return cli_fail(CLI_ERR_USAGE, "plot", "--panel-titles applies with --grid only");
    a->opts.cmap = (attn_colormap)a->cmap;
    if (a->range == 2 && !a->grid) return cli_fail(CLI_ERR_USAGE, "plot", "--range panel applies with --grid only");
    a->opts.auto_range = a->range == 0;
    a->opts.panel_range = a->range == 2;
    a->opts.annotate = a->values == 1 ? 1 : a->values == 2 ? -1 : 0;
    return CLI_OK;
}

/* Offset of the matrix selected by --index in t (which keeps `keep` trailing dims). */
static int select_offset(const plot_args *a, const attn_tensor *t, int keep, int64_t *offset)
{
    int lead = t->ndim - keep;
    int64_t idx[ATTN_MAX_DIMS] = {0};
    int given = 0;
    if (a->index) {
        char *copy = strdup(a->index);
        const char **items = NULL;
        int64_t n = copy ? split_list(copy, &items) : -1;
        int code = n < 0 ? cli_fail(CLI_ERR_DATA, "plot", "out of memory") : CLI_OK;
        for (int64_t i = 0; code == CLI_OK && i < n && given < ATTN_MAX_DIMS; i++) {
            long v;
            if (!cli_parse_long("plot", "--index", items[i], 0, 1L << 40, &v))
                code = CLI_ERR_USAGE;
            else
                idx[given++] = v;
        }
        free(items);
        free(copy);
        if (code != CLI_OK) return code;
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
 * ... (attn_plot_heatmap_heads' layout). */
static int plot_grid(plot_args *a, const float *values, int64_t panels, int64_t rows, int64_t cols)
{
    char *store = NULL;
    const char **titles = NULL;
    int code = CLI_OK;
    if (a->panel_titles) {
        int64_t n = (store = strdup(a->panel_titles)) ? split_list(store, &titles) : -1;
        if (n != panels)
            code =
                cli_fail(CLI_ERR_USAGE, "plot", "%lld --panel-titles for %lld panels", (long long)n, (long long)panels);
    }
    if (code == CLI_OK && attn_plot_heatmap_heads(a->out, values, panels, rows, cols, titles, &a->opts) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "plot", "%s", attn_last_error());
    free(titles);
    free(store);
    return code;
}

int cmd_plot(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "heatmap")) {
        bool asked = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        if (!asked && argc >= 2) cli_fail(CLI_ERR_USAGE, "plot", "unknown plot \"%s\"; expected heatmap", argv[1]);
        cli_help(&plot_spec, asked ? stdout : stderr);
        return asked ? CLI_OK : CLI_ERR_USAGE;
    }
    plot_args a;
    int code = parse(argc, argv, &a);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
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
        code = cli_fail(CLI_ERR_DATA, "plot", "tensor \"%s\" has shape %s; a heatmap needs at least %d dims", a.tensor,
                        attn_shape_str(t, buf, sizeof buf), keep);
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
            code = cli_fail(CLI_ERR_USAGE, "plot", "%d labels for the %s axis, which has %lld entries", (int)n,
                            k ? "query (rows)" : "key (columns)", (long long)want[k]);
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
            code = cli_fail(CLI_ERR_DATA, "plot", "%s, tensor \"%s\": %s", a.in, a.tensor, attn_last_error());
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
