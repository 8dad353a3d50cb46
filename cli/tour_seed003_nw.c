/* attn tour, seed 003 (动手学深度学习 Part5), Nadaraya-Watson kernel regression on the tutorial's
 * own data (tour_nw.h): the data and the true function, the fixed Gaussian kernel
 * f(x) = sum_i softmax(-(x - x_i)^2 / 2) y_i, and NWKernelRegression with a learned width w
 * trained by SGD exactly as the listing does (the 20 lines it prints), with both figures. */
#include "tour.h"
#include "tour_nw.h"

#include <stdio.h>
#include <string.h>

typedef struct nw_tensors {
    attn_tensor *x_train, *y_train, *x_test, *y_true; /* 1-D, in ctx */
} nw_tensors;

static bool nw_load(attn_ctx *ctx, nw_tensors *d)
{
    d->x_train = attn_tensor_from(ctx, 1, (int64_t[]){TOUR_NW_TRAIN}, tour_nw_x_train);
    d->y_train = attn_tensor_from(ctx, 1, (int64_t[]){TOUR_NW_TRAIN}, tour_nw_y_train);
    d->x_test = attn_tensor_from(ctx, 1, (int64_t[]){TOUR_NW_TEST}, tour_nw_x_test);
    d->y_true = attn_tensor_from(ctx, 1, (int64_t[]){TOUR_NW_TEST}, tour_nw_y_true);
    return d->x_train && d->y_train && d->x_test && d->y_true;
}

/* x.repeat(rows, 1): every test query sees every training point (the listing's keys_test). */
static attn_tensor *repeat_rows(attn_ctx *ctx, const attn_tensor *x, int64_t rows)
{
    attn_tensor *r = attn_tensor_empty(ctx, 2, (int64_t[]){rows, x->numel});
    for (int64_t i = 0; r && i < rows; i++) memcpy(r->data + i * x->numel, x->data, (size_t)x->numel * sizeof(float));
    return r;
}

/* Test predictions with width w (NULL: the fixed kernel), weights (50, 150). */
static attn_tensor *predict(attn_ctx *ctx, const nw_tensors *d, attn_tensor *w, attn_tensor **weights)
{
    return attn_nw_forward(ctx, w, d->x_test, repeat_rows(ctx, d->x_train, TOUR_NW_TEST),
                           repeat_rows(ctx, d->y_train, TOUR_NW_TEST), weights);
}

/* The listing's figure: train data, true function and (when y_hat) the NW prediction. */
static int plot_fit(const tour_run *t, const char *name, const char *title, const nw_tensors *d,
                    const attn_tensor *y_hat)
{
    attn_series s[3] = {
        {.label = "train data", .x = d->x_train->data, .y = d->y_train->data, .n = TOUR_NW_TRAIN, .scatter = true},
        {.label = "true function", .x = d->x_test->data, .y = d->y_true->data, .n = TOUR_NW_TEST},
        {.label = "NW prediction", .x = d->x_test->data, .y = y_hat ? y_hat->data : NULL, .n = TOUR_NW_TEST},
    };
    attn_lineplot_opts po = {.title = title, .xlabel = "x", .ylabel = "y"};
    return tour_lines(t, name, s, y_hat ? 3 : 2, &po);
}

/* D2L's picture of the weights: rows = test inputs, columns = training inputs, both sorted. */
static int plot_weights(const tour_run *t, const char *name, const char *title, const attn_tensor *w)
{
    attn_heatmap_opts ho = {.title = title,
                            .xlabel = "sorted training inputs",
                            .ylabel = "sorted testing inputs",
                            .cmap = ATTN_CMAP_REDS,
                            .auto_range = true,
                            .annotate = -1};
    return tour_heatmap(t, name, w->data, TOUR_NW_TEST, TOUR_NW_TRAIN, &ho);
}

/* Mean squared distance of the prediction from the true function, and a few of its values. */
static void print_prediction(const tour_run *t, const nw_tensors *d, const attn_tensor *y_hat)
{
    double mse = 0;
    for (int i = 0; i < TOUR_NW_TEST; i++) {
        double e = (double)y_hat->data[i] - d->y_true->data[i];
        mse += e * e / TOUR_NW_TEST;
    }
    printf("x       ");
    for (int i = 0; i < TOUR_NW_TEST; i += 10) printf(" %7.1f", d->x_test->data[i]);
    printf("\ny_hat   ");
    for (int i = 0; i < TOUR_NW_TEST; i += 10) printf(" %7.4f", y_hat->data[i]);
    printf("\ny_true  ");
    for (int i = 0; i < TOUR_NW_TEST; i += 10) printf(" %7.4f", d->y_true->data[i]);
    TOUR_PRINTF(t, "\nmean squared distance from the true function: %.4f\n", "\n与真实函数的均方距离：%.4f\n", mse);
}

int tour_003_nw_data(tour_run *t)
{
    nw_tensors d;
    if (!nw_load(t->ctx, &d)) return tour_fail(t);
    tour_print_shape("x_train", d.x_train);
    tour_print_shape("y_train", d.y_train);
    tour_print_shape("x_test", d.x_test);
    TOUR_PRINTF(t, "x_train[:4] = %.4f %.4f %.4f %.4f (sorted U(0, 5))\n",
                "x_train[:4] = %.4f %.4f %.4f %.4f（U(0, 5) 排序后）\n", d.x_train->data[0], d.x_train->data[1],
                d.x_train->data[2], d.x_train->data[3]);
    TOUR_SAY(t, "the tutorial's data: PyTorch made it with torch.manual_seed(66666666666666)\n",
             "这是教程自己的数据：PyTorch 在 torch.manual_seed(66666666666666) 下生成\n");
    tour_keep(t, "x_train", d.x_train);
    tour_keep(t, "y_train", d.y_train);
    tour_keep(t, "x_test", d.x_test);
    tour_keep(t, "y_true", d.y_true);
    return plot_fit(t, "003_nw_data.png", "train data and the true function", &d, NULL);
}

int tour_003_nw_fixed(tour_run *t)
{
    nw_tensors d;
    attn_tensor *w = NULL, *y_hat = nw_load(t->ctx, &d) ? predict(t->ctx, &d, NULL, &w) : NULL;
    if (!y_hat) return tour_fail(t);
    tour_print_shape(TOUR_TR(t, "attention weights (test queries x training keys)", "注意力权重（测试查询 × 训练键）"),
                     w);
    print_prediction(t, &d, y_hat);
    tour_keep(t, "y_hat", y_hat);
    tour_keep(t, "attention_weights", w);
    int code = plot_fit(t, "003_nw_fixed.png", "fixed Gaussian kernel (w = 1)", &d, y_hat);
    return code == CLI_OK ? plot_weights(t, "003_nw_fixed_weights.png", "fixed kernel: attention weights", w) : code;
}

/* The listing's loop: full-batch SGD(lr 0.5) on leave-one-out keys and values, 20 epochs. The
 * ctx is reset after every step, so the data is put back into it each time. */
static int train(tour_run *t, attn_params *p, attn_tensor *w, float *losses, float *ws)
{
    attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_SGD);
    cfg.lr = 0.5f;
    attn_optim *opt = cli_optim_new(p, &cfg);
    if (!opt) return tour_fail(t);
    attn_ctx_set_grad_enabled(t->ctx, true);
    int code = CLI_OK;
    for (int epoch = 0; epoch < 20 && code == CLI_OK; epoch++) {
        nw_tensors d;
        attn_tensor *loss = NULL;
        if (nw_load(t->ctx, &d)) {
            attn_tensor *keys = attn_nw_leave_one_out(t->ctx, d.x_train);
            attn_tensor *values = attn_nw_leave_one_out(t->ctx, d.y_train);
            loss = attn_mse_loss(t->ctx, attn_nw_forward(t->ctx, w, d.x_train, keys, values, NULL), d.y_train);
        }
        attn_params_zero_grad(p);
        if (!loss || attn_backward(t->ctx, loss) != ATTN_OK || attn_optim_step(opt) != ATTN_OK) {
            code = tour_fail(t);
            break;
        }
        losses[epoch] = loss->data[0];
        ws[epoch] = w->data[0];
        printf("epoch %02d, loss = %.4f, w = %.4f\n", epoch + 1, losses[epoch], ws[epoch]);
        attn_ctx_reset(t->ctx);
    }
    attn_ctx_set_grad_enabled(t->ctx, false);
    attn_optim_free(opt);
    return code;
}

int tour_003_nw_train(tour_run *t)
{
    attn_params *p = attn_params_new();
    attn_tensor *w = p ? attn_params_add(p, "w", 0, NULL) : NULL;
    if (!w) {
        attn_params_free(p);
        return tour_fail(t);
    }
    w->data[0] = 1.0f; /* nn.Parameter(torch.tensor(1.0)) */
    float losses[20], ws[20];
    nw_tensors d;
    int code = train(t, p, w, losses, ws);
    attn_tensor *weights = NULL, *y_hat = NULL;
    if (code == CLI_OK && (!nw_load(t->ctx, &d) || !(y_hat = predict(t->ctx, &d, w, &weights)))) code = tour_fail(t);
    if (code == CLI_OK) {
        print_prediction(t, &d, y_hat);
        tour_keep_raw(t, "losses", losses, 1, (int64_t[]){20});
        tour_keep_raw(t, "w", ws, 1, (int64_t[]){20});
        tour_keep(t, "y_hat", y_hat);
        code = plot_fit(t, "003_nw_fit.png", "NW regression, w learned by SGD", &d, y_hat);
    }
    if (code == CLI_OK)
        code = plot_weights(t, "003_nw_train_weights.png", "learned kernel: attention weights", weights);
    attn_params_free(p);
    return code;
}
