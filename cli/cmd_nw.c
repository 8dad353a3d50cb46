/* attn nw: seed 003's Nadaraya-Watson kernel regression trained with SGD. Generates
 * y = 2.333 sin x + x^0.666 + N(0, 0.5^2) on 150 sorted points of U(0, 5) (or reads x_train,
 * y_train, x_test, y_true from --data), learns the kernel width w on leave-one-out keys, prints
 * "epoch NN, loss = X, w = Y" per epoch like the seed, and plots the fit. */
#include "options.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct nw_options {
    long epochs, n_train, seed;
    double lr;
    const char *data, *out, *plot, *plot_loss;
} nw_options;

typedef struct nw_data {
    attn_tensor *x_train, *y_train, *x_test, *y_true; /* heap tensors, 1-D */
} nw_data;

static const cli_option options[] = {
    {"--epochs", "N", CLI_OPT_AT(nw_options, CLI_LONG, epochs), 1, 1000000, NULL, "20", "epochs"},
    {"--lr", "X", CLI_OPT_AT(nw_options, CLI_DOUBLE, lr), 0, 1e6, NULL, "0.5", "SGD learning rate"},
    {"--n-train", "N", CLI_OPT_AT(nw_options, CLI_LONG, n_train), 3, 5000, NULL, "150",
     "generated training points, up to 5000: leave-one-out needs N^2 memory, 1.3 GB at 5000"},
    {"--seed", "S", CLI_OPT_AT(nw_options, CLI_LONG, seed), 0, 2147483647.0, NULL, "0", "data seed"},
    {"--data", "FILE", CLI_OPT_AT(nw_options, CLI_IN_FILE, data), 0, 0, NULL, NULL,
     "x_train, y_train, x_test, y_true from a safetensors file instead"},
    {"--out", "FILE", CLI_OPT_AT(nw_options, CLI_OUT_FILE, out), 0, 0, NULL, NULL,
     "save losses, w per epoch, x_test, y_true and predictions (safetensors)"},
    {"--plot", "FILE", CLI_OPT_AT(nw_options, CLI_PICTURE, plot), 0, 0, NULL, "nw_fit.png",
     "the fit plot (.png, .svg or .pdf; \"none\" to skip)"},
    {"--plot-loss", "FILE", CLI_OPT_AT(nw_options, CLI_PICTURE, plot_loss), 0, 0, NULL, NULL, "the loss curve"},
};

const cli_spec nw_spec = {
    .cmd = "nw",
    .synopsis = "[options]",
    .about = "Seed 003: Nadaraya-Watson kernel regression as attention pooling, the kernel width w\n"
             "learned by SGD on leave-one-out keys; prints the loss and w per epoch and plots the fit.",
    CLI_OPTIONS(options),
};

/* Options, then every path checked before any work. */
static int parse(int argc, char **argv, nw_options *o)
{
    memset(o, 0, sizeof *o);
    int code = cli_parse(&nw_spec, o, argc, argv, 1, NULL, NULL);
    if (code != CLI_OK) return code;
    if (o->plot && !strcmp(o->plot, "none")) o->plot = NULL;
    return cli_check_paths(&nw_spec, o, NULL);
}

static float target_fn(float x)
{
    return 2.333f * sinf(x) + powf(x, 0.666f);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static attn_status generate(nw_data *d, long n, long seed)
{
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)seed);
    d->x_train = attn_tensor_alloc(1, (int64_t[]){n});
    d->y_train = attn_tensor_alloc(1, (int64_t[]){n});
    d->x_test = attn_tensor_alloc(1, (int64_t[]){50});
    d->y_true = attn_tensor_alloc(1, (int64_t[]){50});
    if (!d->x_train || !d->y_train || !d->x_test || !d->y_true) return attn_last_status();
    for (long i = 0; i < n; i++) d->x_train->data[i] = 5.0f * attn_rng_uniform(&rng);
    qsort(d->x_train->data, (size_t)n, sizeof(float), cmp_float);
    for (long i = 0; i < n; i++) d->y_train->data[i] = target_fn(d->x_train->data[i]) + 0.5f * attn_rng_normal(&rng);
    for (int i = 0; i < 50; i++) {
        d->x_test->data[i] = 0.1f * (float)i;
        d->y_true->data[i] = target_fn(d->x_test->data[i]);
    }
    return ATTN_OK;
}

static attn_status load(nw_data *d, const char *path)
{
    attn_st_file *f = attn_st_open(path);
    if (!f) return attn_last_status();
    const char *names[4] = {"x_train", "y_train", "x_test", "y_true"};
    attn_tensor **slots[4] = {&d->x_train, &d->y_train, &d->x_test, &d->y_true};
    attn_status st = ATTN_OK;
    for (int i = 0; i < 4 && st == ATTN_OK; i++)
        if (!(*slots[i] = attn_st_load(f, names[i], NULL))) st = attn_last_status();
    attn_st_close(f);
    if (st != ATTN_OK) return st;
    if (d->x_train->ndim != 1 || !attn_same_shape(d->x_train, d->y_train) || d->x_train->numel < 3 ||
        d->x_test->ndim != 1 || !attn_same_shape(d->x_test, d->y_true)) {
        attn_clear_error(); /* the message is ours, printed here */
        fprintf(stderr,
                "attn nw: %s: expected 1-D x_train and y_train of one length >= 3, and 1-D "
                "x_test and y_true of one length\n",
                path);
        return ATTN_ERR_SHAPE;
    }
    for (int i = 0; i < 4; i++)
        if (attn_tensor_check_finite(*slots[i], names[i]) != ATTN_OK) {
            fprintf(stderr, "attn nw: %s: %s\n", path, attn_last_error());
            attn_clear_error(); /* printed here */
            return ATTN_ERR_NUMERIC;
        }
    return ATTN_OK;
}

static void free_data(nw_data *d)
{
    attn_tensor_free(d->x_train);
    attn_tensor_free(d->y_train);
    attn_tensor_free(d->x_test);
    attn_tensor_free(d->y_true);
}

/* keys[i, :] = x for every query row (the test-time keys of seed 003). */
static attn_tensor *repeat_rows(attn_ctx *ctx, const attn_tensor *x, int64_t rows)
{
    attn_tensor *t = attn_tensor_empty(ctx, 2, (int64_t[]){rows, x->numel});
    if (t)
        for (int64_t r = 0; r < rows; r++) memcpy(t->data + r * x->numel, x->data, (size_t)x->numel * sizeof(float));
    return t;
}

static int plot_fit(const nw_options *o, const nw_data *d, const float *pred)
{
    attn_series s[3] = {
        {.label = "train data", .x = d->x_train->data, .y = d->y_train->data, .n = d->x_train->numel, .scatter = true},
        {.label = "true function", .x = d->x_test->data, .y = d->y_true->data, .n = d->x_test->numel, .dashed = true},
        {.label = "NW prediction", .x = d->x_test->data, .y = pred, .n = d->x_test->numel},
    };
    attn_lineplot_opts po = {.title = "Nadaraya-Watson kernel regression", .xlabel = "x", .ylabel = "y"};
    if (attn_plot_lines(o->plot, s, 3, &po) != ATTN_OK) return cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error());
    printf("wrote %s\n", o->plot);
    return CLI_OK;
}

static int plot_loss(const nw_options *o, const float *losses)
{
    attn_series s = {.label = "training loss", .y = losses, .n = o->epochs};
    attn_lineplot_opts po = {
        .title = "NW regression: training loss", .xlabel = "epoch", .ylabel = "MSE", .log_y = true};
    attn_status st = attn_plot_lines(o->plot_loss, &s, 1, &po);
    if (st != ATTN_OK) return cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error());
    printf("wrote %s\n", o->plot_loss);
    return CLI_OK;
}

static int save(const nw_options *o, const nw_data *d, const float *losses, const float *ws, const float *pred)
{
    attn_st_writer *w = attn_st_writer_new();
    int64_t e = o->epochs, n = d->x_test->numel;
    attn_status st = w ? ATTN_OK : attn_last_status();
    if (st == ATTN_OK) st = attn_st_writer_add(w, "losses", ATTN_DTYPE_F32, 1, &e, losses);
    if (st == ATTN_OK) st = attn_st_writer_add(w, "w", ATTN_DTYPE_F32, 1, &e, ws);
    if (st == ATTN_OK) st = attn_st_writer_add(w, "y_hat", ATTN_DTYPE_F32, 1, &n, pred);
    if (st == ATTN_OK) st = attn_st_writer_add_tensor(w, "x_test", d->x_test);
    if (st == ATTN_OK) st = attn_st_writer_add_tensor(w, "y_true", d->y_true);
    if (st == ATTN_OK) st = attn_st_writer_set_metadata(w, "format", "attn-nw-run");
    if (st == ATTN_OK) st = attn_st_writer_save(w, o->out);
    attn_st_writer_free(w);
    return st == ATTN_OK ? CLI_OK : cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error());
}

/* Trains w; losses[e] and ws[e] per epoch (w after the step, as the seed prints it). */
static int train(const nw_options *o, const nw_data *d, attn_params *p, attn_tensor *w, float *losses, float *ws)
{
    attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_SGD);
    cfg.lr = (float)o->lr;
    attn_optim *opt = cli_optim_new(p, &cfg);
    attn_ctx *ctx = cli_ctx_new(0);
    int code = opt && ctx ? CLI_OK : cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error());
    for (long e = 0; code == CLI_OK && e < o->epochs; e++) {
        attn_tensor *keys = attn_nw_leave_one_out(ctx, d->x_train);
        attn_tensor *values = attn_nw_leave_one_out(ctx, d->y_train);
        attn_tensor *y_hat = attn_nw_forward(ctx, w, d->x_train, keys, values, NULL);
        attn_tensor *loss = attn_mse_loss(ctx, y_hat, d->y_train);
        attn_params_zero_grad(p);
        if (!loss || attn_backward(ctx, loss) != ATTN_OK || attn_optim_step(opt) != ATTN_OK) {
            code = cli_fail(CLI_ERR_DATA, "nw", "epoch %ld: %s", e + 1, attn_last_error());
            break;
        }
        losses[e] = loss->data[0];
        ws[e] = w->data[0];
        if (!isfinite(losses[e]) || !isfinite(ws[e]))
            code = cli_fail(CLI_ERR_DATA, "nw", "epoch %ld: the loss or w became %g / %g; lower --lr", e + 1, losses[e],
                            ws[e]);
        printf("epoch %02ld, loss = %.4f, w = %.4f\n", e + 1, losses[e], ws[e]);
        attn_ctx_reset(ctx);
    }
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    return code;
}

static int predict(const nw_data *d, attn_tensor *w, float *pred)
{
    attn_ctx *ctx = cli_ctx_new(0);
    if (!ctx) return cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error());
    attn_ctx_set_grad_enabled(ctx, false);
    int64_t n = d->x_test->numel;
    attn_tensor *y =
        attn_nw_forward(ctx, w, d->x_test, repeat_rows(ctx, d->x_train, n), repeat_rows(ctx, d->y_train, n), NULL);
    if (y) memcpy(pred, y->data, (size_t)n * sizeof(float));
    attn_ctx_free(ctx);
    return y ? CLI_OK : cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error());
}

/* A failed run leaves none of the outputs it created: those written before the failure are
 * removed (regular files only; a device or FIFO stays as it was). A file that was there before
 * the run is kept, holding what this run wrote to it. */
static void remove_outputs(const char *const *paths, int n)
{
    struct stat st;
    for (int i = 0; i < n; i++)
        if (lstat(paths[i], &st) == 0 && S_ISREG(st.st_mode)) unlink(paths[i]);
}

int cmd_nw(int argc, char **argv)
{
    nw_options o;
    int code = parse(argc, argv, &o);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
    nw_data d = {0};
    attn_status st = o.data ? load(&d, o.data) : generate(&d, o.n_train, o.seed);
    if (st != ATTN_OK) {
        free_data(&d);
        return attn_last_status() != ATTN_OK ? cli_fail(CLI_ERR_DATA, "nw", "%s", attn_last_error()) : CLI_ERR_DATA;
    }
    const double n = (double)d.x_train->numel, m = (double)d.x_test->numel;
    char
        what[PATH_MAX + 64]; /* leave-one-out: ~52 bytes per (train, train) pair (measured); prediction (test, train) */
    snprintf(what, sizeof what, "--data %s: %.0f training and %.0f test points", o.data ? o.data : "", n, m);
    if (o.data && !cli_check_fits("nw", 52.0 * n * n + 16.0 * m * n, what)) {
        free_data(&d);
        return CLI_ERR_DATA;
    }
    attn_params *p = attn_params_new();
    attn_tensor *w = p ? attn_params_add(p, "w", 0, NULL) : NULL;
    float *losses = malloc((size_t)o.epochs * sizeof(float)), *ws = malloc((size_t)o.epochs * sizeof(float));
    float *pred = malloc((size_t)d.x_test->numel * sizeof(float));
    if (!w || !losses || !ws || !pred) {
        code = cli_fail(CLI_ERR_DATA, "nw", "out of memory");
    } else {
        w->data[0] = 1.0f; /* nn.Parameter(torch.tensor(1.0)) */
        code = train(&o, &d, p, w, losses, ws);
        if (code == CLI_OK) code = predict(&d, w, pred);
        const char *created[2]; /* this run's outputs so far that were absent before it */
        int n_created = 0;
        struct stat st;
        const bool had_out = o.out && lstat(o.out, &st) == 0, had_plot = o.plot && lstat(o.plot, &st) == 0;
        if (code == CLI_OK && o.out && (code = save(&o, &d, losses, ws, pred)) == CLI_OK && !had_out)
            created[n_created++] = o.out;
        if (code == CLI_OK && o.plot && (code = plot_fit(&o, &d, pred)) == CLI_OK && !had_plot)
            created[n_created++] = o.plot;
        if (code == CLI_OK && o.plot_loss) code = plot_loss(&o, losses);
        if (code != CLI_OK) remove_outputs(created, n_created);
    }
    free(losses);
    free(ws);
    free(pred);
    attn_params_free(p);
    free_data(&d);
    return code;
}
