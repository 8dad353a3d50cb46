/* Layer norm over the last dim of a (rows, cols) block, forward and backward.
 *   forward:  mean = sum x / C,  var = sum (x - mean)^2 / C,  rstd = 1 / sqrt(var + eps),
 *             xhat = (x - mean) * rstd,  y = xhat * w + b          (w, b NULL: 1 and 0)
 *   backward: g = dy * w,  dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),
 *             dw += sum_rows dy * xhat,  db += sum_rows dy
 * With mean NULL the same kernels are RMSNorm, layer norm without centring: the mean is 0,
 * rstd = 1 / sqrt(sum x^2 / C + eps), and the backward's mean(g) term drops out (x was not
 * centred, so nothing of g is taken away with the mean).
 * Row and column sums are accumulated in double; mean and rstd are kept per row for backward.
 *
 * *_ref is the formula as written, kept forever and tested against the fast one. The fast one
 * runs rows in parallel (OpenMP, big blocks only), keeps LANES independent double partial sums
 * per row (fixed-count inner loops that -O2 vectorises without reassociation), and computes
 * dw and db by blocks of COL_BLOCK columns, each owned by one thread. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"

#include <math.h>
#include <stddef.h>

#define LANES 8
#define COL_BLOCK 64

/* ---- reference ---- */

void attn__layernorm_rows_ref(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                              int64_t rows, int64_t cols, float eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double sum = 0.0, sq = 0.0;
        for (int64_t c = 0; mean && c < cols; c++) sum += xr[c];
        double mu = sum / (double)cols;
        for (int64_t c = 0; c < cols; c++) sq += (xr[c] - mu) * (xr[c] - mu);
        double rs = 1.0 / sqrt(sq / (double)cols + eps);
        for (int64_t c = 0; c < cols; c++) {
            double v = (xr[c] - mu) * rs;
            if (w) v *= w[c];
            if (b) v += b[c];
            y[r * cols + c] = (float)v;
        }
        if (mean) mean[r] = (float)mu;
        rstd[r] = (float)rs;
    }
}

void attn__layernorm_rows_backward_ref(float *dx, float *dw, float *db, const float *dy, const float *x,
                                       const float *mean, const float *rstd, const float *w, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; dx && r < rows; r++) {
        const float *xr = x + r * cols, *dyr = dy + r * cols;
        const double mu = mean ? mean[r] : 0.0;
        double sg = 0.0, sgx = 0.0; /* sum g (centred only), sum g * xhat */
        for (int64_t c = 0; c < cols; c++) {
            double xhat = ((double)xr[c] - mu) * rstd[r];
            double g = (double)dyr[c] * (w ? w[c] : 1.0f);
            if (mean) sg += g;
            sgx += g * xhat;
        }
        for (int64_t c = 0; c < cols; c++) {
            double xhat = ((double)xr[c] - mu) * rstd[r];
            double g = (double)dyr[c] * (w ? w[c] : 1.0f);
            dx[r * cols + c] += (float)(rstd[r] * (g - sg / cols - xhat * sgx / cols));
        }
    }
    for (int64_t c = 0; (dw || db) && c < cols; c++) {
        double sw = 0.0, sb = 0.0; /* sum_rows dy * xhat, sum_rows dy */
        for (int64_t r = 0; r < rows; r++) {
            sw += (double)dy[r * cols + c] * (((double)x[r * cols + c] - (mean ? mean[r] : 0.0f)) * rstd[r]);
            sb += dy[r * cols + c];
        }
        if (dw) dw[c] += (float)sw;
        if (db) db[c] += (float)sb;
    }
}

/* ---- fast ---- */

static double lanes_sum(const double *s)
{
    double sum = 0.0;
    for (int k = 0; k < LANES; k++) sum += s[k];
    return sum;
}

static double row_sum(const float *x, int64_t n)
{
    double a[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) a[k] += x[c + k];
    for (; c < n; c++) a[0] += x[c];
    return lanes_sum(a);
}

/* sum (x - mu)^2 */
static double row_sq_dev(const float *x, double mu, int64_t n)
{
    double a[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) a[k] += (x[c + k] - mu) * (x[c + k] - mu);
    for (; c < n; c++) a[0] += (x[c] - mu) * (x[c] - mu);
    return lanes_sum(a);
}

/* y = (x - m) * rs */
static void row_normalise(float *restrict y, const float *restrict x, float m, float rs, int64_t n)
{
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) y[c + k] = (x[c + k] - m) * rs;
    for (; c < n; c++) y[c] = (x[c] - m) * rs;
}

static void row_mul(float *restrict y, const float *restrict w, int64_t n)
{
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) y[c + k] *= w[c + k];
    for (; c < n; c++) y[c] *= w[c];
}

static void row_add(float *restrict y, const float *restrict b, int64_t n)
{
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) y[c + k] += b[c + k];
    for (; c < n; c++) y[c] += b[c];
}

static void layernorm_row(float *restrict y, float *mean, float *rstd, const float *restrict x, const float *restrict w,
                          const float *restrict b, int64_t n, float eps)
{
    double mu = mean ? row_sum(x, n) / (double)n : 0.0; /* RMSNorm: not centred */
    float m = (float)mu, rs = (float)(1.0 / sqrt(row_sq_dev(x, mu, n) / (double)n + eps));
    row_normalise(y, x, m, rs, n);
    if (w) row_mul(y, w, n);
    if (b) row_add(y, b, n);
    if (mean) *mean = m;
    *rstd = rs;
}

void attn__layernorm_rows(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t rows, int64_t cols, float eps, int threads)
{
    if (threads <= 1 || rows == 1 || rows * cols < ATTN_PARALLEL_MIN / 2) { /* no team to start (the decoder's step) */
        for (int64_t r = 0; r < rows; r++)
            layernorm_row(y + r * cols, mean ? mean + r : NULL, rstd + r, x + r * cols, w, b, cols, eps);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < rows; r++)
        layernorm_row(y + r * cols, mean ? mean + r : NULL, rstd + r, x + r * cols, w, b, cols, eps);
}

/* dx (n) += rstd * (g - mean(g) - xhat * mean(g * xhat)) for one row, g = dy * w (w or NULL),
 * all in double, as the reference: g is the exact product (a double holds float x float
 * exactly) in both passes, and the three terms, of the size of dy, nearly cancel when the row is
 * (nearly) constant or has two elements, while rstd (up to 1/sqrt(eps)) magnifies what is left.
 * In float, with dy * w rounded in one pass and fused into an FMA in the other, a row of one
 * element gave dx -7.7e-3 at eps 1e-12 where the exact (and torch's) value is 0.
 * Always inlined into calls where w is known NULL or not, so that the loops vectorise. */
static inline __attribute__((always_inline)) void layernorm_row_dx_w(float *restrict dx, const float *restrict dy,
                                                                     const float *restrict x, const float *restrict w,
                                                                     float mean, float rstd, bool centred, int64_t n)
{
    double sg[LANES] = {0}, sgx[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) {
            double g = w ? (double)dy[c + k] * w[c + k] : dy[c + k];
            sg[k] += g;
            sgx[k] += g * (((double)x[c + k] - mean) * rstd);
        }
    for (; c < n; c++) {
        double g = w ? (double)dy[c] * w[c] : dy[c];
        sg[0] += g;
        sgx[0] += g * (((double)x[c] - mean) * rstd);
    }
    const double mg = centred ? lanes_sum(sg) / (double)n : 0.0, mgx = lanes_sum(sgx) / (double)n;
    for (c = 0; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) {
            double g = w ? (double)dy[c + k] * w[c + k] : dy[c + k];
            dx[c + k] += (float)(rstd * (g - mg - ((double)x[c + k] - mean) * rstd * mgx));
        }
    for (; c < n; c++) {
        double g = w ? (double)dy[c] * w[c] : dy[c];
        dx[c] += (float)(rstd * (g - mg - ((double)x[c] - mean) * rstd * mgx));
    }
}

static void layernorm_row_dx(float *dx, const float *dy, const float *x, const float *w, float mean, float rstd,
                             bool centred, int64_t n)
{
    if (w)
        layernorm_row_dx_w(dx, dy, x, w, mean, rstd, centred, n);
    else
        layernorm_row_dx_w(dx, dy, x, NULL, mean, rstd, centred, n);
}

/* dw[c0..c1) += sum_rows dy * xhat, db[c0..c1) += sum_rows dy, summed in double. */
static void layernorm_cols_dwdb(float *dw, float *db, const float *dy, const float *x, const float *mean,
                                const float *rstd, int64_t rows, int64_t cols, int64_t c0, int64_t c1)
{
    double aw[COL_BLOCK] = {0}, ab[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * cols, *xr = x + r * cols;
        for (int64_t c = c0; c < c1; c++) {
            aw[c - c0] += (double)dyr[c] * ((xr[c] - (mean ? mean[r] : 0.0f)) * rstd[r]);
            ab[c - c0] += dyr[c];
        }
    }
    for (int64_t c = c0; c < c1; c++) {
        if (dw) dw[c] += (float)aw[c - c0];
        if (db) db[c] += (float)ab[c - c0];
    }
}

void attn__layernorm_rows_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *w, int64_t rows, int64_t cols, int threads)
{
    if (dx) {
#pragma omp parallel for schedule(static) num_threads(threads) if (rows > 1 && rows * cols >= ATTN_PARALLEL_MIN / 2)
        for (int64_t r = 0; r < rows; r++)
            layernorm_row_dx(dx + r * cols, dy + r * cols, x + r * cols, w, mean ? mean[r] : 0.0f, rstd[r],
                             mean != NULL, cols);
    }
    if (dw || db) {
        int64_t blocks = (cols + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (blocks > 1 && rows * cols >= ATTN_PARALLEL_MIN / 2)
        for (int64_t k = 0; k < blocks; k++) {
            int64_t c1 = (k + 1) * COL_BLOCK < cols ? (k + 1) * COL_BLOCK : cols;
            layernorm_cols_dwdb(dw, db, dy, x, mean, rstd, rows, cols, k * COL_BLOCK, c1);
        }
    }
}
