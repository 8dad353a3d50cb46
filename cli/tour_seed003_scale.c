/* attn tour 003/sqrt-d: why scaled dot-product attention divides by sqrt(d_k) (seed 003's
 * a(q, k) = q^T k / sqrt(d), seed 000's "为什么除以 √d_k", seed 002's "缩放因子的数学意义").
 * For q, k ~ N(0, I_d): Var(q.k) = d, so the scores grow with d and the softmax over them turns
 * one-hot, its gradient sum_j p_j (1 - p_j) going to 0; dividing by sqrt(d) keeps Var = 1 and
 * the softmax as soft at every d. Measured here on 100 queries x 10 keys per d. */
#include "tour.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

enum {
    N_D = 16,
    D_STEP = 32,
    QUERIES = 100,
    KEYS = 10
};

typedef struct scale_stats { /* per d_k, over QUERIES x KEYS scores */
    float d[N_D];
    float var_raw[N_D], var_scaled[N_D];   /* variance of q.k and of q.k / sqrt(d) */
    float max_raw[N_D], max_scaled[N_D];   /* mean largest softmax weight of a query */
    float grad_raw[N_D], grad_scaled[N_D]; /* mean sum_j p_j (1 - p_j) */
} scale_stats;

static float variance(const float *s, int64_t n, double scale)
{
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = s[i] * scale;
        sum += v;
        sq += v * v;
    }
    return (float)(sq / n - (sum / n) * (sum / n));
}

/* The mean largest weight and the mean softmax "gradient size" of weights p (QUERIES, KEYS). */
static void saturation(const float *p, float *max_w, float *grad)
{
    double m = 0, g = 0;
    for (int q = 0; q < QUERIES; q++) {
        float best = 0;
        for (int j = 0; j < KEYS; j++) {
            float w = p[q * KEYS + j];
            best = w > best ? w : best;
            g += w * (1.0 - w);
        }
        m += best;
    }
    *max_w = (float)(m / QUERIES);
    *grad = (float)(g / QUERIES);
}

static bool measure(tour_run *t, int i, scale_stats *s)
{
    const int64_t d = (int64_t)(i + 1) * D_STEP;
    attn_tensor *q = attn_tensor_empty(t->ctx, 3, (int64_t[]){QUERIES, 1, d});
    attn_tensor *k = attn_tensor_empty(t->ctx, 3, (int64_t[]){QUERIES, KEYS, d});
    if (!q || !k) return false;
    attn_tensor_fill_normal(q, &t->rng, 0, 1);
    attn_tensor_fill_normal(k, &t->rng, 0, 1);
    attn_tensor *scores = attn_matmul(t->ctx, q, k, false, true); /* (QUERIES, 1, KEYS) */
    attn_tensor *p_raw = attn_softmax(t->ctx, scores, -1);
    attn_tensor *p_scaled = attn_softmax(t->ctx, attn_scale(t->ctx, scores, 1.0f / sqrtf((float)d)), -1);
    if (!p_raw || !p_scaled) return false;
    s->d[i] = (float)d;
    s->var_raw[i] = variance(scores->data, scores->numel, 1.0);
    s->var_scaled[i] = variance(scores->data, scores->numel, 1.0 / sqrt((double)d));
    saturation(p_raw->data, &s->max_raw[i], &s->grad_raw[i]);
    saturation(p_scaled->data, &s->max_scaled[i], &s->grad_scaled[i]);
    attn_ctx_reset(t->ctx);
    return true;
}

static int plot(const tour_run *t, const scale_stats *s)
{
    float ones[N_D];
    for (int i = 0; i < N_D; i++) ones[i] = 1.0f;
    attn_series var[4] = {
        {.label = "Var(q·k)", .x = s->d, .y = s->var_raw, .n = N_D, .scatter = true},
        {.label = "Var(q·k / √d_k)", .x = s->d, .y = s->var_scaled, .n = N_D, .scatter = true},
        {.label = "d_k (theory)", .x = s->d, .y = s->d, .n = N_D, .dashed = true},
        {.label = "1 (theory)", .x = s->d, .y = ones, .n = N_D, .dashed = true},
    };
    attn_lineplot_opts vo = {.title = "q, k ~ N(0, I): variance of the score",
                             .xlabel = "d_k",
                             .ylabel = "variance over 1000 scores",
                             .log_y = true};
    int code = tour_lines(t, "003_sqrt_d_variance.png", var, 4, &vo);
    const uint32_t raw = ATTN_RGB(31, 119, 180), scaled = ATTN_RGB(255, 127, 14);
    attn_series soft[4] = {
        {.label = "largest weight, softmax(q·k)", .x = s->d, .y = s->max_raw, .n = N_D, .color = raw},
        {.label = "largest weight, softmax(q·k / √d_k)", .x = s->d, .y = s->max_scaled, .n = N_D, .color = scaled},
        {.label = "Σ p(1-p), softmax(q·k)", .x = s->d, .y = s->grad_raw, .n = N_D, .dashed = true, .color = raw},
        {.label = "Σ p(1-p), softmax(q·k / √d_k)",
         .x = s->d,
         .y = s->grad_scaled,
         .n = N_D,
         .dashed = true,
         .color = scaled},
    };
    attn_lineplot_opts so = {.title = "softmax over 10 keys: saturation",
                             .xlabel = "d_k",
                             .ylabel = "mean over 100 queries",
                             .ylim = {0, 1.45f}};
    return code == CLI_OK ? tour_lines(t, "003_sqrt_d_softmax.png", soft, 4, &so) : code;
}

int tour_003_sqrt_d(tour_run *t)
{
    scale_stats s;
    for (int i = 0; i < N_D; i++)
        if (!measure(t, i, &s)) return tour_fail(t);
    TOUR_PRINTF(t, "q, k ~ N(0, I_d): %d queries x %d keys per d_k\n",
                "q, k ~ N(0, I_d)：每个 d_k 取 %d 个查询 × %d 个键\n", QUERIES, KEYS);
    TOUR_SAY(t,
             "   d_k   Var(q·k)   Var(q·k/√d_k)   largest weight      Σ p(1-p) (gradient)\n"
             "                                      q·k   q·k/√d_k          q·k   q·k/√d_k\n",
             "   d_k   Var(q·k)   Var(q·k/√d_k)       最大权重          Σ p(1-p)（梯度）\n"
             "                                      q·k   q·k/√d_k          q·k   q·k/√d_k\n");
    static const int shown[5] = {0, 1, 3, 7, 15}; /* d_k 32, 64, 128, 256, 512 */
    for (int k = 0; k < 5; k++) {
        int i = shown[k];
        printf("%6.0f %10.1f %15.3f %8.3f %10.3f   %10.3f %10.3f\n", s.d[i], s.var_raw[i], s.var_scaled[i],
               s.max_raw[i], s.max_scaled[i], s.grad_raw[i], s.grad_scaled[i]);
    }
    TOUR_SAY(t, "unscaled, the scores spread as √d_k and the softmax turns one-hot: its gradient vanishes\n",
             "不缩放时，分数的尺度随 √d_k 增大，softmax 趋于 one-hot，梯度随之消失\n");
    static const struct {
        const char *name;
        size_t offset;
    } saved[7] = {
        {"d_k", offsetof(scale_stats, d)},
        {"var_raw", offsetof(scale_stats, var_raw)},
        {"var_scaled", offsetof(scale_stats, var_scaled)},
        {"max_weight_raw", offsetof(scale_stats, max_raw)},
        {"max_weight_scaled", offsetof(scale_stats, max_scaled)},
        {"grad_raw", offsetof(scale_stats, grad_raw)},
        {"grad_scaled", offsetof(scale_stats, grad_scaled)},
    };
    for (int i = 0; i < 7; i++)
        tour_keep_raw(t, saved[i].name, (const float *)((const char *)&s + saved[i].offset), 1, (int64_t[]){N_D});
    return plot(t, &s);
}
